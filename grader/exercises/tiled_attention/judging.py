"""tiled_attention's judgement of one call: the memory gate every tiled check goes through
(tiled_call: the worker's memory counted outside it; tracemalloc's peak only explains a
failure), the read records of K and V (key_tiles, one_pass_over_keys: advice, no points), and
the comparison with the float64 reference with a hint for a known mistake (check_tiled,
check_naive). Shared by its cpu and adversarial checks and its hidden checks."""

from __future__ import annotations

import contextlib

import numpy as np

from grader.exercises.tiled_attention.mistakes import attention_hint
from grader.judge.answers import reference
from grader.judge.answers.compare import CheckFailed, assert_close, values
from grader.sandbox import memory
from grader.wire.codec import Trusted

KiB, MiB = 1 << 10, 1 << 20

MEMORY = "tiled_attention.memory_is_tiled"


def tile_step(d: int, Br: int, Bc: int) -> int:
    """Bytes of one tile step, each array counted as float64: the (Br, Bc) scores, the (Br, d)
    acc and q, the (Bc, d) k and v."""
    return 8 * (Br * Bc + Br * d + Bc * d)


# the warm-up of the outside count's baseline worker (grader.sandbox.memory.fresh_baseline): the
# exercise's largest products, so BLAS's workspace is touched there as in a submission's worker
WARM_MODULE = ("import numpy as np\n\n\ndef warm(N, d, dtype):\n"
               "    a = np.ones((N, d), dtype=dtype)\n"
               "    return float(((a @ a.T) @ a).sum())\n")
WARM = (("warm", (1000, 128, "float64")), ("warm", (2011, 16, "float32")))
# measured on the solution and the variants: the worker's heap and caches drift by < 1.5 MB
# between calls; a tiled call's count rises < 0.6 MB beyond its inputs and output
LEFTOVER_SLACK = 2 * MiB
GROWTH_SLACK = 1 * MiB
LARGEST_CALL = 5 * MiB     # inputs and output of the largest call (N = 1000, d = 128, float64)
_LAST_IO: dict[int, int] = {}   # worker pid -> bytes of the last call's inputs and output


def io_bytes(arrays) -> int:
    return sum(np.asarray(values(a)).nbytes for a in arrays)


def outside_extra(sub, rss: dict, io: int) -> tuple[int, int]:
    """(grown, held): bytes beyond what no call can avoid, counted outside the worker.
    grown: how far its count rose during the call, less this call's inputs and output
    (received, decoded, answered: twice each) and a slack; a child's memory and an mmap count.
    held: its count when the call started, less a warm baseline worker's, the last call's
    inputs and output (which the worker still holds when this one starts) and a slack: memory
    allocated at import, or kept from an earlier call."""
    if "bytes" not in rss:
        return 0, 0
    # a cgroup peak that could not be reset (rss["since_start"]) holds earlier calls' too: the
    # rise is then the worker process's own (its VmHWM, reset, and VmRSS sampled)
    grown = (rss["process_bytes"] - rss["process_before"] if rss["since_start"]
             else rss["bytes"] - rss["before"]) - 2 * io - GROWTH_SLACK
    base = memory.fresh_baseline(sub, WARM_MODULE, WARM)
    if base is None:
        return grown, 0
    # the last call seen here, or one made elsewhere: at least this call's size, and where
    # nothing is known the exercise's largest call (the hidden checks' untouched-inputs calls
    # are made with the shapes of the call before them)
    leftover = max(_LAST_IO.get(rss["pid"], LARGEST_CALL), io)
    return grown, rss["before"] - base - leftover - LEFTOVER_SLACK


def unmeasured(what: str, case: str, seed: int, follows: tuple = (MEMORY,)) -> CheckFailed:
    """The failure of a memory check where no outside count exists (memory.available() is
    False): it fails closed (grader.sandbox.memory.UNMEASURED)."""
    return CheckFailed(f"{what} ({case}) [seed {seed}]: {memory.UNMEASURED}.",
                       hint=memory.UNMEASURED_HINT, follows=follows)


def tiled_call(sub, Q, K, V, Br: int | None, Bc: int | None, what: str, case: str, seed: int,
               opts: dict | None = None, record: bool = False):
    """tiled_attention(Q, K, V[, Br, Bc]) with its memory counted outside the worker
    (grader.sandbox.memory: the worker's cgroup, or VmHWM; what it held when the call started
    counts, outside_extra), gated on that memory: this exercise's idea is tiling, so a call
    whose peak holds about the N x N scores earns nothing in any tiled check, whatever its
    output (the kernel-use gate of the Triton exercises, for tiles). Only the outside count
    decides; tracemalloc runs in the worker too, and its peak explains a failure in the
    message. Where no outside count exists (not Linux) the gate cannot trip: the tiled checks
    judge the answer alone there, and memory_is_tiled, whose idea it is, fails closed.
    The gate trips only on N x N evidence: a peak beyond the output of more than 4 tile steps +
    8 KiB + four float64 N x d arrays (copies of Q, K, V and a float64 acc for the whole output:
    wasteful, memory_is_tiled's business, but tiled) AND of at least half an N x N float32
    matrix (2 N^2 bytes). Where N x N is not well above that (small N, large d), nothing can
    tell the two apart and nothing trips; every tiled check has a case where it is. record: K
    and V arrive as arrays that log which rows are read (recorded(); key_tiles and
    one_pass_over_keys judge the log; the result is then returned whole, extras["reads"]
    included)."""
    blocks = {} if Br is None else {"Br": Br, "Bc": Bc}
    args = (Q, *recorded(K, V)) if record else (Q, K, V)
    try:
        with memory.peak_rss(sub) if memory.available() else contextlib.nullcontext({}) as rss:
            res = sub.call("tiled_attention", *args, **blocks,
                           opts={**(opts or {}), "tracemalloc": True})
    except memory.Unmeasurable as e:
        raise CheckFailed(f"{what} ({case}) [seed {seed}]: {e}; the memory gate fails closed.",
                          hint="Leave the process alone: no prctl, no changes to /proc.",
                          follows=(MEMORY,)) from None
    N, d = Q.shape
    Br, Bc = Br or 64, Bc or 64
    out_item = max(Q.dtype.itemsize, np.asarray(values(res.value)).dtype.itemsize
                   if np.asarray(values(res.value)).dtype.kind == "f" else 0)
    output = N * d * out_item
    io = io_bytes((Q, K, V)) + output
    if rss:
        outside = outside_extra(sub, rss, io)   # (grown during the call, held before it)
        _LAST_IO[rss["pid"]] = io
        memory_gate(what, case, seed, N, d, Br, Bc, Q.dtype.itemsize, outside, rss.get("how"),
                    memory.traced(res.extras))
    return res if opts or record else res.value


def memory_gate(what: str, case: str, seed: int, N: int, d: int, Br: int, Bc: int, item: int,
                outside: tuple, how: str | None, explained: str = "") -> None:
    """tiled_call's verdict on one call's memory (see there): the outside count's rise during
    the call with what the worker held before it, against one bound; what was held before the
    call alone has its own message. `explained`: tracemalloc's peak in words, for the message
    only (it runs in the worker, so it is not evidence)."""
    tile = tile_step(d, Br, Bc)
    scores = N * N * item
    allowed = 4 * tile + 8 * KiB + 4 * N * d * 8
    grown, held = outside
    # held is net of LEFTOVER_SLACK, the worker's drift between calls: where a float32 N x N is
    # smaller than that slack, the slack hides it anyway and only drift could count (page cache
    # charged under memory pressure: 0.7 MB past the slack at N = 192 on a loaded two-core
    # machine), so what was held before the call counts only where N x N stands above the drift
    if 4 * N * N < LEFTOVER_SLACK:
        held = min(held, 0)
    hint = ("Tiling is this exercise's idea: build one (Br, Bc) score tile at a time from "
            "q = Q[i:i+Br] and k = K[j:j+Bc], never the N x N scores, in any memory (also none "
            "prepared at import or kept from an earlier call).")
    also = f" ({explained})" if explained else ""
    if held > allowed and held >= 2 * N * N and held >= grown:
        raise CheckFailed(
            f"{what} ({case}) [seed {seed}]: when the call started, the worker already held "
            f"{held} bytes more than a fresh worker that loaded the same libraries and the "
            f"call's inputs (counted outside it: {how}), where one (Br, Bc) tile step takes "
            f"{tile} bytes{also}. Memory allocated at import or kept from an earlier call counts "
            f"against the call that uses it: a tiled call needs none.", hint=hint,
            follows=(MEMORY,))
    seen = grown + max(held, 0)
    if seen > allowed and seen >= 2 * N * N:
        raise CheckFailed(
            f"{what} ({case}) [seed {seed}]: the call held about the N x N scores: the "
            f"worker's memory (counted outside it: {how}; mmaps included) rose {grown} bytes "
            f"more during the call than its inputs and output account for"
            + (f", on top of {held} held before it" if held > 0 else "") +
            f"{also}; one (Br, Bc) tile step takes {tile} bytes and the N x N scores {scores}. "
            f"An output computed without tiles earns no tiled points, right or not "
            f"(memory_is_tiled measures this).", hint=hint, follows=(MEMORY,))


def recorded(K, V) -> tuple:
    """K and V as the worker's RowRecorder (grader/worker/row_recorder.py): real (N, d) arrays of
    the same values that log which rows NumPy reads."""
    return tuple(Trusted("row_recorder", params={"values": a, "dtype": a.dtype.name, "name": name})
                 for a, name in ((K, "K"), (V, "V")))


def reads_of(res, what: str, case: str, seed: int) -> dict:
    """The row logs of K and V from a recorded call, by name: {"K": log, "V": log}, each with
    int "widest_rows" and "passes". Missing, partial or malformed logs fail (the advice checks
    that read them fail closed: no record is never a pass)."""
    logs = res.extras.get("reads")
    found = {r.get("name"): r for r in logs if isinstance(r, dict)} if isinstance(logs, list) else {}
    fields = ("widest_rows", "passes")
    if set(found) != {"K", "V"} or any(type(found[n].get(f)) is not int for n in found for f in fields):
        raise CheckFailed(
            f"{what} ({case}) [seed {seed}]: the grader got no readable record of how K and V "
            f"were read ({type(logs).__name__} {logs!r:.80}), so the tiles cannot be seen; the "
            f"evidence was missing, which is never a pass.",
            hint="Read K and V as given, one block at a time (K[j:j + Bc]): the grader's "
                 "recording arrays log those reads.", follows=())
    return found


def key_tiles(res, N: int, Bc: int, what: str, case: str, seed: int) -> None:
    """The lesson's tiles: K and V read Bc rows at a time. A read of more rows at once (K @ q
    for a whole query row, K.T of all keys in one product) is attention without key tiles,
    whatever memory it took. Advice, no points (the record is the worker's)."""
    for name, log in sorted(reads_of(res, what, case, seed).items()):
        widest = log["widest_rows"]
        if widest > Bc:
            raise CheckFailed(
                f"{what} ({case}) [seed {seed}]: expected {name} to be read one block of at most "
                f"Bc = {Bc} rows at a time, but one operation read {widest} of its {N} rows at "
                f"once: right or not, a row of N scores is not a (Br, Bc) tile.",
                hint="Tiling: the inner loop takes one key/value block at a time, k = K[j:j+Bc] "
                     "and v = V[j:j+Bc], and builds the (Br, Bc) score tile q @ k.T; a whole row "
                     "of scores (K @ q against every key) is not a tile.",
                follows=())


def one_pass_over_keys(res, what: str, case: str, seed: int) -> None:
    """The online rescale: per query block, one pass over the key blocks, each read with its
    value block. More passes over K than over V is a pass for the max alone, then sums against
    a fixed max: right, but the rescale by alpha that makes one pass enough is skipped.
    Advice, no points (the record is the worker's)."""
    logs = reads_of(res, what, case, seed)
    k, v = logs["K"]["passes"], logs["V"]["passes"]
    if v == 0:
        raise CheckFailed(
            f"{what} ({case}) [seed {seed}]: V was never read by rows (K in {k} passes): the "
            f"record shows no pass over the value blocks to compare with the key blocks'.",
            hint="Read each value block with its key block, v = V[j:j + Bc], in the same loop.")
    if k > v:
        raise CheckFailed(
            f"{what} ({case}) [seed {seed}]: expected one pass over the key blocks per query "
            f"block, each key block read with its value block; K was read in {k} passes and V "
            f"in {v}: a pass over K for the row max first, then the sums against that fixed "
            f"max. Right here, but not the online softmax.",
            hint="The online rescale: one pass over the key blocks. Keep a running max m; when a "
                 "block raises it, rescale l and acc by alpha = exp(m - m_new) before adding the "
                 "block's p and p @ v. No separate pass to find the max first.")


def check_tiled(sub, Q, K, V, Br: int, Bc: int, case: str, seed: int, record: bool = False):
    """Call tiled_attention (gated on its memory) and compare with the float64 reference.
    record: K and V recorded, and the call's result returned whole (its read logs for the
    advice checks: key_tiles, one_pass_over_keys)."""
    label = f"N={Q.shape[0]}, d={Q.shape[1]}, {Q.dtype.name}, {case}"
    what = f"tiled_attention(Q, K, V, Br={Br}, Bc={Bc})"
    res = tiled_call(sub, Q, K, V, Br, Bc, what, label, seed, record=record)
    out = res.value if record else res
    try:
        assert_close(out, reference.attention(Q, K, V), what=what,
                     input_dtype=Q.dtype.name, terms=Q.shape[0],
                     case=f"N={Q.shape[0]}, d={Q.shape[1]}, {Q.dtype.name}, {case}", seed=seed,
                     grid=(Br, None))   # a picture of a failure: one band per query block
    except CheckFailed as e:
        # the hint only when the output equals a known mistake's answer (mistakes.py)
        raise CheckFailed(str(e), hint=attention_hint(
            out, Q, K, V, block_n=Bc, input_dtype=Q.dtype.name) or e.hint) from None
    return res


def check_naive(sub, Q, K, V, case: str, seed: int):
    """Call naive_attention and compare with the float64 reference."""
    out = sub.naive_attention(Q, K, V)
    if memory.available():   # what the worker still holds when the next call starts (tiled_call)
        with contextlib.suppress(OSError, memory.Unmeasurable):
            _LAST_IO[sub.worker_pid] = io_bytes((Q, K, V, out))
    try:
        assert_close(out, reference.attention(Q, K, V),
                     what="naive_attention(Q, K, V)", input_dtype=Q.dtype.name, terms=Q.shape[0],
                     case=f"N={Q.shape[0]}, d={Q.shape[1]}, {Q.dtype.name}, {case}", seed=seed)
    except CheckFailed as e:
        raise CheckFailed(str(e), hint=attention_hint(
            out, Q, K, V, input_dtype=Q.dtype.name) or e.hint) from None

