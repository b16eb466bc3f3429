"""Did the wrapper compute with its Triton kernel, or with PyTorch?

The worker records, below the dispatcher, every aten op that ran during the call and counts
Triton launches (`opts={"trace": True}`, grader/sandbox/probes.py). A wrapper may allocate, view and copy
around its launch; any other op computes (torch.softmax shows as _softmax, SDPA as
_scaled_dot_product_*, matmul as mm/bmm, the eager softmax as max/sub/exp/sum/div).
Arithmetic done in NumPy dispatches no torch op and is not seen here.
"""

from __future__ import annotations

from grader.judge.compare import CheckFailed

# aten ops a wrapper may run around the launch: allocation, views, copies and dtype casts (the
# interpreter itself adds new_empty/set_/copy_ to move arguments). Anything else computes.
ALLOWED_OPS = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like",
    "new_zeros", "full", "full_like", "new_full", "fill_", "zero_", "resize_", "set_",
    "copy_", "clone", "_to_copy", "contiguous", "detach", "alias", "lift_fresh",
    "lift_fresh_copy", "view", "_unsafe_view", "reshape", "_reshape_alias", "as_strided",
    "expand", "transpose", "t", "permute", "unsqueeze", "squeeze", "select", "slice",
    "narrow", "unbind", "split",
})


def assert_kernel_computed(extras: dict, call: str, launch: str, work: str) -> None:
    """Fail unless the call launched a Triton kernel and ran no computing torch op.

    call: "softmax(x)"; launch: "softmax_kernel[(n_rows,)](...)"; work: what the kernel must do."""
    ops = list(extras.get("ops", []))
    computing = sorted(set(ops) - ALLOWED_OPS)
    if int(extras.get("launches", 0)) < 1:
        raise CheckFailed(f"{call} launched no Triton kernel; the torch ops it ran: "
                          f"{', '.join(ops) or 'none'}. {work} must be computed by {launch}.")
    if computing:
        raise CheckFailed(f"{call} computed with PyTorch around its kernel: {', '.join(computing)}. "
                          f"Only allocations, views and copies may run in the wrapper; {work} "
                          f"belongs in {launch.split('[')[0]}.")
