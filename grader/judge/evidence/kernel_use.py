"""Did the wrapper compute with its Triton kernel, or with something else?

Evidence, gathered in the worker around one call (grader/worker/probes.py) and judged here:
  - every aten op that ran below the dispatcher, and the number of Triton launches (`trace`):
    a wrapper may allocate, view and copy around its launch; any other op computes
    (torch.softmax shows as _softmax, SDPA as _scaled_dot_product_*, matmul as mm/bmm);
  - on a GPU (`kernels`), every device kernel that ran, from every thread of the worker, recorded
    by torch.profiler (CUPTI): only the student's Triton kernels and copies/fills may run;
  - on a GPU, NVML's list of processes using the device: only the grader and its worker;
  - under the interpreter (`bounds`), every load and store checked against the tensors of the
    call (grader/worker/bounds.py); the masks' verdict (assert_in_bounds) is judged on the same
    record made by the call's replay, where no student code runs.
All of that is evidence from the student's process, which can switch it off. What decides
whether the kernels computed the answer is provenance (grader.judge.evidence.provenance, through `gate`'s
`replayed`): the call's recorded program is replayed in a worker holding only the submission's
kernels and must give the same answer. The static audit (grader.judge.source.audit) is a first, friendly
message for honest mistakes.
"""

from __future__ import annotations

from grader.judge.answers.compare import CheckFailed
from grader.judge.perf.quiet_gpu import gpu_processes
from grader.registry import EXERCISES

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

# device kernels that only move or fill memory (allocation poisoning, .contiguous(), casts)
COPY_KERNELS = ("FillFunctor", "fill_kernel", "direct_copy_kernel", "copy_kernel", "Memcpy",
                "Memset", "memcpy", "memset")


# the graded functions of the Triton exercises, each with (call, launch, work) for the messages,
# and the torch ops each wrapper may run beyond ALLOWED_OPS: from the exercises' registry rows
KERNELS = {name: dict(e.kernels) for name, e in EXERCISES.items() if e.kernels}
EXTRA_OPS = {name: e.extra_ops for name, e in EXERCISES.items() if e.extra_ops}


def assert_kernel_computed(extras: dict, call: str, launch: str, work: str,
                           allowed: frozenset = frozenset()) -> None:
    """Fail unless the call launched a Triton kernel and nothing else computed.

    call: "softmax(x)"; launch: "softmax_kernel[(n_rows,)](...)"; work: what the kernel must do;
    allowed: ops this exercise's wrapper may run beyond ALLOWED_OPS (flash_decode: reducing
    seq_lens to a split count)."""
    ops = list(extras.get("ops", []))
    computing = sorted(set(ops) - ALLOWED_OPS - set(allowed))
    if int(extras.get("launches", 0)) < 1:
        raise CheckFailed(f"{call} launched no Triton kernel; the torch ops it ran: "
                          f"{', '.join(ops) or 'none'}. {work} must be computed by {launch}.",
                          hint=f"{work[0].upper()}{work[1:]} must be computed by {launch}: the "
                               f"wrapper only allocates and launches.")
    if computing:
        raise CheckFailed(f"{call} computed with PyTorch around its kernel: {', '.join(computing)}. "
                          f"Only allocations, views and copies may run in the wrapper; {work} "
                          f"belongs in {launch.split('[')[0]}.",
                          hint=f"Only allocations, views and copies may run in the wrapper; "
                               f"{work} belongs in {launch.split('[')[0]}.")
    if "kernels" in extras:
        foreign = foreign_kernels(extras["kernels"], extras.get("triton_kernels", []))
        if foreign:
            shown = ", ".join(k[:120] for k in foreign[:3])
            raise CheckFailed(f"{call}: device kernels other than your Triton kernels ran during "
                              f"the call (from any thread of the process): {shown}. {work} must "
                              f"be computed by {launch}.",
                              hint=f"{work[0].upper()}{work[1:]} must be computed by {launch}; "
                                   f"cuDNN, cuBLAS, flash or PyTorch kernels earn nothing.")


def gate(extras: dict, exercise: str, fn: str, call: str | None = None,
         gpu_pid: int | None = None, replayed=None, defer: list | None = None,
         timed=None) -> None:
    """The kernel-use gate, the one every graded call of a Triton exercise passes (the checks'
    `student()` proxy, fixtures.ProvingSubmission, for every untimed call; the sanitizer's call): the
    registry's (call, launch, work) for `fn` (Exercise.kernels) and the ops its wrapper may run
    (Exercise.extra_ops); on CUDA (`gpu_pid`, the worker's pid) no helper process on the GPU.
    `call` names this call in the message (a case, a seed). `replayed` (a provenance.Call):
    the call's recorded program is replayed from the kernels alone and must give the same
    answer (grader.judge.evidence.provenance); with `defer`, that replay is appended there as a function
    to run once the check is over (grader.plugin runs them only for a check that earned
    something: a wrong answer earns nothing anyway, and the interpreter's replay costs as much
    as the call). `timed` (a replayed.TimedCall): a timed call of the perf layer, whose replay is
    judged by its checksum (grader.judge.perf.timed_requests.Requests). A failure follows
    <exercise>.uses_kernel: whatever check made the call failed for that check's idea."""
    from grader.judge.evidence import provenance

    want, launch, work = KERNELS[exercise][fn]
    allowed = ALLOWED_OPS | EXTRA_OPS.get(exercise, frozenset())
    try:
        assert_kernel_computed(extras, call or want, launch, work,
                               allowed=EXTRA_OPS.get(exercise, frozenset()))
        if gpu_pid is not None:
            assert_gpu_alone(gpu_pid, call or want)
    except CheckFailed as e:
        e.follows = (f"{exercise}.uses_kernel",)
        raise
    if replayed is None:
        return
    if defer is None:
        provenance.check(extras, exercise, call or want, allowed, replayed, timed)
    else:
        defer.append(lambda: provenance.check(extras, exercise, call or want, allowed, replayed,
                                              timed))


def foreign_kernels(kernels: list, triton_names: list) -> list:
    """The device kernels that are neither the student's Triton kernels nor copies/fills."""
    out = []
    for name in kernels:
        if any(name == t or name.startswith(t + "_") or name.startswith(t + "(") for t in triton_names):
            continue
        if any(c in name for c in COPY_KERNELS):
            continue
        out.append(name)
    return sorted(out)


# ------------------------------------------------------------------------- out of bounds


def assert_in_bounds(r, names: list[str], call: str, masks: dict) -> None:
    """Fail when a load or store of the call `r` (a gated call's result, grader.fixtures)
    reached past the end of a tensor, judged on evidence the student's process never held:
    the replay of the call's launches, bounds-checked lane by lane in the replay worker
    (grader.judge.evidence.provenance: `bounds_judge`, run when the check's body is over). Only where no
    replay runs (the repo's mutant corpus, tests.helpers.grader_command(replay=False)) is the
    call's own record judged, at once. On CUDA nothing is recorded (compute-sanitizer judges
    there): no verdict here.

    names: the argument names in order ("q", "k", "v"); masks: {"tl.load": hint, "tl.store":
    hint} naming the mask each kind of access needs."""
    if not (getattr(r, "opts", None) or {}).get("bounds"):
        return
    if getattr(r, "replayed", None) is not None:
        r.replayed.bounds_judge = lambda records: out_of_bounds(records, names, call, masks)
    else:
        out_of_bounds(r.extras.get("out_of_bounds"), names, call, masks)


def out_of_bounds(records, names: list[str], call: str, masks: dict) -> None:
    """assert_in_bounds' verdict on a record of lanes outside the call's tensors
    (grader/worker/bounds.py): [{access, line, code, tensor, lanes, past}]. A record that is
    not a list fails: the evidence was missing."""
    if not isinstance(records, list) or not all(isinstance(x, dict) for x in records):
        raise CheckFailed(f"{call}: the grader got no readable record of which lanes its loads "
                          f"and stores touched, so staying in bounds cannot be judged; the "
                          f"evidence was missing, which is never a pass.")
    if not records:
        return
    lines = []
    for r in records:
        label = r.get("tensor", {})
        if "arg" in label and label.get("into"):
            tensor = (f"the output, into the input "
                      f"{names[label['arg']] if label['arg'] < len(names) else ''} (inputs are read-only)")
        elif "arg" in label:
            tensor = f"{names[label['arg']] if label['arg'] < len(names) else 'an input'} (argument)"
        elif "alloc" in label:
            tensor = f"the tensor your wrapper allocated ({label['alloc']})"
        elif "launch" in label:
            tensor = f"a tensor passed to {label['launch']}"
        else:
            tensor = "any tensor of the call"
        past = f", up to {r['past']} elements past its end" if r.get("past") else ""
        verb = "wrote" if r["access"] in ("tl.store", "tl.atomic") else "read"
        code = f" (`{r['code'][:100]}`)" if r.get("code") else ""
        lines.append(f"{r['access']} at {r['line']}{code} {verb} {r['lanes']} lanes outside "
                     f"{tensor}{past}")
    first = records[0]["access"]
    hint = masks.get(first if first in masks else "tl.load", "")
    raise CheckFailed(f"{call}: " + "; ".join(lines[:3]) + ". The grader checks every lane of "
                      "every access under the interpreter; those lanes were switched off, so "
                      "other checks do not see them.", hint=hint)


def allocation_of(extras: dict, numel: int) -> dict | None:
    """The allocation of `numel` elements made during the call, with its store counts
    (grader/worker/bounds.py), if any: the output a wrapper allocates."""
    found = [a for a in extras.get("allocations", []) if a["numel"] == numel]
    # the one the kernel stored into most (a wrapper may also make a contiguous copy of x)
    return min(found, key=lambda a: a["unstored"]) if found else None


def assert_kernel_wrote(extras: dict, value, numel: int, call: str, launch: str) -> None:
    """Fail unless a kernel of the call stored every element of a new tensor of `numel`
    elements (the output), all finite: a kernel that computes nothing (a stub whose body is
    `...` stores nothing, or stores 0 / 0), or an output that is not the kernel's, earns
    nothing. Stores are tracked under the interpreter only."""
    import numpy as np

    from grader.judge.answers.compare import values

    got = np.asarray(values(value), dtype=np.float64)
    if got.size != numel:
        raise CheckFailed(f"{call}: expected an output of {numel} elements, got shape "
                          f"{tuple(got.shape)}")
    bad = ~np.isfinite(got)
    if bad.any():
        stored = ""
        a = allocation_of(extras, numel)
        if a is not None and a["stored_nan"]:
            stored = f" ({a['stored_nan']} NaN values were stored by the kernel)"
        raise CheckFailed(f"{call}: {int(bad.sum())} of {numel} output elements are NaN or inf "
                          f"on ordinary inputs (randn){stored}. {launch} must compute every "
                          f"element.", hint=f"{launch} must compute every output element: a "
                          f"kernel that computes nothing (0 / 0 gives NaN) earns nothing.")
    if "allocations" not in extras:
        return
    a = allocation_of(extras, numel)
    if a is None:
        raise CheckFailed(f"{call} returned no tensor allocated in the call and written by "
                          f"{launch}: the output must be a new tensor your kernel stores into.")
    if a["unstored"]:
        raise CheckFailed(f"{call}: {a['unstored']} of {numel} elements of the output were never "
                          f"stored by any kernel (first at flat index {a['first_unstored']}). "
                          f"{launch} must store the whole output.",
                          hint=f"{launch} must compute and store every output element; a kernel "
                               f"that stores nothing earns nothing.")


# ------------------------------------------------------------------------- GPU processes


def assert_gpu_alone(worker_pid: int | None, call: str) -> None:
    """Fail when a process started by the submission uses the GPU (a helper process computing
    the answer): any GPU process in the worker's session (the worker leads its own session, and
    children keep it even when re-parented), other than the worker itself. Processes of other
    sessions (another grading run on the same GPU) are not the submission's."""
    if not worker_pid:
        return
    pids = gpu_processes()
    if not pids:
        return
    helpers = sorted(p for p in pids if p != int(worker_pid) and _session(p) == _session(int(worker_pid)))
    if helpers:
        raise CheckFailed(f"{call}: processes started by your code used the GPU during the check "
                          f"(PIDs {helpers}). The answer must come from your kernel, in the "
                          f"process the grader called.")


def _session(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[3])   # state, ppid, pgrp, session
    except (OSError, IndexError, ValueError):
        return None
