"""bench_attn's sweeps as the grader calls and reads them: the rows of the student's run_sweep
(keys, order, the JSON file it wrote) and each timed row (ms, tflops from the formula, peak_gb).
Shared by its cpu, adversarial and gpu checks."""

from __future__ import annotations

import json
import math

from grader.exercises.bench_attn.judging import fits_clock, is_number, positive_ms
from grader.judge.answers.compare import CheckFailed
from grader.wire.codec import Trusted

ROW_KEYS = ("N", "impl", "ms", "tflops", "peak_gb")
MAX_JSON_BYTES = 1 << 20
FLOAT32 = Trusted("dtype", params={"dtype": "float32"})    # torch.float32, built in the worker
# per (impl, N): what one call of a clocked impl takes, drawn per N (clock.log_spread over a
# sweep's Ns, so that the rows of one impl are a factor of 2 or more apart)
SWEEP_MS = (0.2, 8.0)


def call_sweep(sub, what: str, Ns, B, H, D, impls: dict, out_name: str,
               check_file: bool = True) -> tuple[list[dict], float]:
    """Run the student's run_sweep on CPU; return its rows (checked for keys and order) and the
    grader's wall time of the call in ms. `check_file`: the JSON at out_name holds the rows."""
    out = sub.scratch / out_name
    out.unlink(missing_ok=True)
    result = sub.call("run_sweep", Ns=list(Ns), B=B, H=H, D=D, dtype=FLOAT32, device="cpu",
                      impls=impls, out_path=out_name)
    rows = result.value
    expected = [(N, name) for N in Ns for name in impls]
    if not isinstance(rows, list):
        raise CheckFailed(f"{what}: expected a list of row dicts, got {type(rows).__name__} "
                          f"{rows!r:.80}")
    for i, (N, name) in enumerate(expected):
        if i >= len(rows):
            raise CheckFailed(f"{what}: expected {len(expected)} rows, one per (N, impl) in order, "
                              f"got {len(rows)}; the row for N={N}, impl={name!r} is missing")
        row = rows[i]
        if not isinstance(row, dict) or set(row) != set(ROW_KEYS):
            keys = sorted(row) if isinstance(row, dict) else type(row).__name__
            raise CheckFailed(f"{what}: row {i} (N={N}, impl={name!r}): expected the keys "
                              f"{list(ROW_KEYS)}, got {keys}")
        if row["N"] != N or row["impl"] != name:
            raise CheckFailed(f"{what}: row {i}: expected N={N}, impl={name!r} (one row per "
                              f"(N, impl), N outer, impls in the given order), got "
                              f"N={row['N']!r}, impl={row['impl']!r}")
    if len(rows) != len(expected):
        raise CheckFailed(f"{what}: expected {len(expected)} rows, one per (N, impl), got "
                          f"{len(rows)}")
    if check_file:
        _check_file(out, out_name, rows, what)
    return rows, result.wall_s * 1e3


def _check_file(path, name: str, rows: list[dict], what: str) -> None:
    """The JSON file the student's run_sweep wrote in its working directory holds the rows."""
    if path.is_symlink():   # the trusted side reads only what the worker wrote, never a link
        raise CheckFailed(f"{what}: expected {name} to be a plain file, got a symbolic link")
    if not path.is_file():
        raise CheckFailed(f"{what}: expected the rows written to {name} (out_path) as JSON, "
                          f"found no such file")
    if path.stat().st_size > MAX_JSON_BYTES:
        raise CheckFailed(f"{what}: {name} is {path.stat().st_size} bytes, far more than the rows")
    try:
        saved = json.loads(path.read_text(errors="replace"))
    except json.JSONDecodeError as e:
        raise CheckFailed(f"{what}: {name} is not valid JSON ({e})") from None
    if not isinstance(saved, list) or len(saved) != len(rows):
        count = len(saved) if isinstance(saved, list) else type(saved).__name__
        raise CheckFailed(f"{what}: expected {name} to hold the {len(rows)} returned rows, "
                          f"got {count}")
    for i, (s, r) in enumerate(zip(saved, rows)):
        if not isinstance(s, dict) or set(s) != set(r):
            raise CheckFailed(f"{what}: {name} row {i}: expected the keys {list(ROW_KEYS)}, got "
                              f"{sorted(s) if isinstance(s, dict) else type(s).__name__}")
        for key in ROW_KEYS:
            a, b = s[key], r[key]
            same = a == b or (is_number(a) and is_number(b)
                              and math.isclose(a, b, rel_tol=1e-9, abs_tol=0.0))
            if not same:
                raise CheckFailed(f"{what}: {name} row {i} (N={r['N']}, impl={r['impl']!r}): "
                                  f"expected {key} = {b!r} as returned, got {a!r} in the file")


def check_timed_row(row: dict, B: int, H: int, D: int, what: str, formula: bool = True) -> None:
    """A row of a run that fit: ms measured, tflops a number (from the formula when `formula`:
    sweep_rows grades it, oom_recorded only needs numbers), peak_gb None on CPU."""
    N, name = row["N"], row["impl"]
    where = f"{what}: row N={N}, impl={name!r}"
    ms = positive_ms(row["ms"], f"{where}, ms")
    flops = 4 * B * H * N * N * D
    tflops = flops / ms / 1e9
    got = row["tflops"]
    if not is_number(got) or got <= 0:
        raise CheckFailed(f"{where}: expected tflops, a positive number, got {got!r}")
    if formula and not math.isclose(got, tflops, rel_tol=1e-6):
        raise CheckFailed(f"{where}: expected tflops = 4*B*H*N^2*D / ms / 1e9 = {flops} / {ms!r} "
                          f"/ 1e9 = {tflops!r}, got {got!r}")
    peak = row["peak_gb"]
    if peak is not None and not (is_number(peak) and peak >= 0):
        raise CheckFailed(f"{where}: expected peak_gb None (no CUDA here) or a number >= 0, "
                          f"got {peak!r}")


def check_rows_on_clock(rows: list[dict], streams: dict, start: float, end: float,
                        what: str) -> None:
    """Each row of a clocked impl (streams: {impl: clock.Stream}, blocking, a drawn time per N)
    holds an ms that timing that impl at that N measures on the grader's clock
    (start, end: the clock around the sweep's call). Rows of other impls, and rows whose ms is
    None (an out-of-memory run), are left to the caller."""
    for row in rows:
        if row["impl"] not in streams or row["ms"] is None:
            continue
        stream = streams[row["impl"]]
        launches = stream.launches(row["N"])
        where = f"{what}: row N={row['N']}, impl={row['impl']!r}"
        if not launches:
            raise CheckFailed(f"{where}: ms = {row['ms']!r}, but the grader's clock saw no call of "
                              f"{row['impl']} at N={row['N']}: every ms must come from timing "
                              f"that impl at that N",
                              hint="time each impl with time_proper(lambda: fn(q, k, v)) at each N")
        outside = fits_clock(row["ms"], stream, launches, start, end)
        if outside:
            low, high, error = outside
            raise error(f"{where}: ms = {row['ms']:.4g}, but one call of {row['impl']} at "
                        f"N={row['N']} took {stream.by_n[row['N']]:.3f} ms of work, and "
                        f"timing it measures between {low:.3f} and {high:.3f} ms on the "
                        f"grader's clock (a little more for the timer itself)",
                        hint="ms comes from time_proper on that impl at that N; is "
                             "time_proper right (see honest_timing)?")
