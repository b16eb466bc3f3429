"""Cheat (issue 18, "a kernel body must be Triton"): under the interpreter a @triton.jit body is
plain Python, so this one reaches the tensors through a module-level dict and calls
torch.softmax itself, with the kernel-use trace switched off through an alias. Triton's
compiler refuses such a body; the interpreter runs it."""
import torch
import triton
import triton.language as tl

_T = torch
_STASH = {}


@triton.jit
def softmax_kernel(out_ptr, in_ptr, n_cols, BLOCK: tl.constexpr):
    with _T._C._DisableTorchDispatch():
        _STASH["out"].copy_(_T.softmax(_STASH["x"].float(), dim=1))


def softmax(x):
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    _STASH["x"], _STASH["out"] = x, out
    softmax_kernel[(1,)](out, x, x.shape[1], BLOCK=16)
    return out
