"""python -m grader batch: grade every submission of a course into one gradebook.

    python -m grader batch SUBMISSIONS_DIR [--out DIR] [--jobs N | --gpus all|N] [--exercises NAMES]
                           [--layers NAMES] [--no-hidden] [--shard I/N] [--timeout S]
    python -m grader batch --merge A.csv B.csv ... [--out gradebook.csv]

Each sub-folder of SUBMISSIONS_DIR is one submission (its name is the gradebook's key). Each is
graded by its own grader process (`python -I grader/__main__.py --sandbox`), so it gets the same
isolation as a single run and a grader problem with one submission costs only that row; its
reports count only when that process completed them (see grade_one). Written under DIR (default batch/):

    reports/<name>.json, .md, .html           each submission's reports (the page with its
                                              pictures inlined)
    gradebook.csv                             submission, one column per exercise, total, max,
                                              note (why grading failed), undecided (the perf
                                              checks this run's readings left open: grade again)
    class.html, class.csv                     the class view (grader/report/class_view.py): the
                                              score distribution, each check's failure rate,
                                              the lead mistakes ranked, the slowest kernels

--jobs N grades N submissions at once; where several GPUs are visible and the GPU layers run,
each job gets a GPU of its own through CUDA_VISIBLE_DEVICES. --gpus all (or a count) grades on
those GPUs instead, one submission per GPU at a time (so its timed checks have the GPU to
themselves), each grade splitting its CPU layers over its share of the cores. Each finished
submission prints its score and the batch's progress with the time left at the rate so far.
--shard I/N grades only the submissions I, I+N, I+2N ... (0 <= I < N) of the sorted list: one
task of a job array; --merge joins the gradebooks of the shards. The gradebook is rewritten
after each submission, so a batch stopped half way leaves the rows it finished; --again grades
only the submissions its gradebook has no whole row for, or a row that failed or left a perf
check undecided, or whose report is gone or older than the submission's files, and keeps the
other rows (an interrupted batch goes on; the undecided are graded again). It refuses a
selection (--exercises, --layers, --no-hidden, --sandbox) other than the batch's own, which
selection.json keeps. Exit status 0 when the gradebook was written.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import queue
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from grader.gradebook import (columns, merge, rows_that_stand, score_cell, selection,
                              write_gradebook, write_selection)
from grader.options import Parser, cpu_text, names
from grader.registry import EXERCISES, LAYERS, ROOT
from grader.sandbox.launcher import copy_sources

SUBMISSION_TIMEOUT_S = 4 * 3600   # backstop per submission; the grader limits every call itself


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="python -m grader batch", description="Grade every submission folder of a course.")
    p.add_argument("submissions", nargs="?", metavar="SUBMISSIONS_DIR",
                   help="folder holding one sub-folder per submission")
    p.add_argument("--out", metavar="DIR",
                   help="where reports and gradebook.csv go (default: batch); with --merge, the "
                        "merged CSV file (default: gradebook.csv)")
    p.add_argument("--jobs", type=int, default=1, metavar="N", help="submissions graded at once")
    p.add_argument("--gpus", type=gpus_spec, metavar="all|N",
                   help="grade on these GPUs (all visible, or the first N): one submission per "
                        "GPU at a time, each with the GPU to itself and its share of the cores "
                        "(sets --jobs)")
    p.add_argument("--exercises", type=lambda v: names(v, EXERCISES, "exercise"), metavar="NAMES")
    p.add_argument("--layers", type=lambda v: names(v, LAYERS, "layer"), metavar="NAMES")
    p.add_argument("--no-hidden", action="store_true", help="skip hidden_tests/ even if present")
    p.add_argument("--shard", type=shard_spec, metavar="I/N",
                   help="grade only every N-th submission, starting at the I-th (0-based)")
    p.add_argument("--timeout", type=float, default=SUBMISSION_TIMEOUT_S, metavar="S",
                   help=f"seconds per submission before it is stopped (default {SUBMISSION_TIMEOUT_S})")
    p.add_argument("--sandbox", action=argparse.BooleanOptionalAction, default=True,
                   help="grade each submission under OS isolation (default; --no-sandbox: "
                        "process isolation only, for a trusted set of submissions)")
    p.add_argument("--again", action="store_true",
                   help="go on from OUT: grade only the submissions its gradebook has no row "
                        "for, or a row that failed, left a perf check undecided or whose report "
                        "is gone or older than the submission; keep the other rows (the same "
                        "--exercises and --layers as the first time)")
    p.add_argument("--merge", nargs="+", metavar="CSV", help="join these gradebooks instead of grading")
    return p


def gpus_spec(value: str) -> str:
    """--gpus: "all", or a count of at least 1 (kept as text: "all" or "N")."""
    if value != "all" and not (value.isdigit() and int(value) >= 1):
        raise argparse.ArgumentTypeError(f"--gpus wants all or a count >= 1, got {value!r}")
    return value


def choose_gpus(args, wants_gpu: bool) -> tuple[list[str], int] | str:
    """(the GPU ids the jobs are pinned to, the number of jobs), or why --gpus cannot be met.

    --gpus all|N: every visible GPU, or the first N, one job each: one submission per GPU at a
    time, so its timed checks have the GPU to themselves. Otherwise --jobs jobs, pinned to the
    visible GPUs in turn when there are several and the GPU layers run."""
    if args.gpus:
        visible = visible_gpus()
        want = len(visible) if args.gpus == "all" else int(args.gpus)
        if not visible or len(visible) < want:
            source = ("CUDA_VISIBLE_DEVICES" if "CUDA_VISIBLE_DEVICES" in os.environ
                      else "nvidia-smi -L")
            return f"--gpus {args.gpus}: {len(visible)} GPU(s) visible ({source})"
        return visible[:want], want
    jobs = max(1, args.jobs)
    gpus = visible_gpus() if jobs > 1 and wants_gpu else []
    return (gpus if len(gpus) > 1 else []), jobs


def core_shares(jobs: int) -> list[list[int]]:
    """The cores this process may use, in `jobs` contiguous shares, one per grade running at
    once: each grade sizes its grading processes by its own share, as a grade alone does by
    the whole machine. One job: no share (the grade takes every core, as alone). Fewer cores
    than jobs: one core each, shared round the jobs."""
    cores = sorted(os.sched_getaffinity(0))
    if jobs <= 1:
        return []
    if len(cores) < jobs:
        return [[cores[i % len(cores)]] for i in range(jobs)]
    size = len(cores) // jobs
    return [cores[i * size:(i + 1) * size] for i in range(jobs)]


def eta(done: int, total: int, elapsed_s: float) -> str:
    """"k/N graded, about M min left": the batch's rate so far (jobs in parallel included)
    carried over the submissions left."""
    if done >= total or not done:
        return f"{done}/{total} graded"
    return f"{done}/{total} graded, about {(total - done) * elapsed_s / done / 60:.1f} min left"


def shard_spec(value: str) -> tuple[int, int]:
    try:
        i, n = (int(x) for x in value.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shard wants I/N, e.g. 0/4, got {value!r}") from None
    if not 0 <= i < n:
        raise argparse.ArgumentTypeError(f"--shard {value}: need 0 <= I < N")
    return i, n


def find_submissions(directory: Path, shard: tuple[int, int] | None) -> list[Path]:
    subs = sorted(p for p in directory.iterdir() if p.is_dir() and not p.name.startswith("."))
    return subs[shard[0]::shard[1]] if shard else subs


def visible_gpus() -> list[str]:
    """GPU ids a job can be given: CUDA_VISIBLE_DEVICES if set, else `nvidia-smi -L`."""
    if "CUDA_VISIBLE_DEVICES" in os.environ:
        return [d.strip() for d in os.environ["CUDA_VISIBLE_DEVICES"].split(",") if d.strip()]
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [str(i) for i, _ in enumerate(l for l in out.splitlines() if l.startswith("GPU "))]


def grade_one(sub: Path, out: Path, args, exercises: list[str], gpu: str | None,
              cpus: list[int] | None = None) -> dict:
    """Grade one submission in its own grader process, on `cpus` (its share of the cores
    when several grades run at once; None: every core); its gradebook row.

    Fail closed: the grader writes into a private folder (0700) of its own and hands over a
    completion marker holding a nonce that only this process knows (sent on the grader's
    stdin). The reports move into reports/ only when the grader exited 0 and the marker holds
    the nonce and the reports' SHA-256; otherwise the row says grading failed.

    The grader grades a copy of the submission's exercise files in that private folder: its
    command line, which every process on the machine may read (/proc; the user level has no
    PID namespace), then names no folder of the class, so a student's code that reads the
    other grades' command lines finds only folders it cannot open (tests/attacks/classmate)."""
    reports = out / "reports"
    final = {"json": reports / f"{sub.name}.json", "md": reports / f"{sub.name}.md",
             "html": reports / f"{sub.name}.html"}
    for path in final.values():
        path.unlink(missing_ok=True)
    private = Path(tempfile.mkdtemp(prefix=".grading-", dir=out))   # mode 0700
    # the page is written beside the Markdown (grader.report.page_path), sealed with it
    made = {"json": private / "report.json", "md": private / "report.md",
            "html": private / "report.html"}
    marker = private / "complete"
    nonce = secrets.token_hex(16)
    # the report names it "submissions/<name>" (the grader's cwd is private); a folder of its
    # own, so no submission's name can be the marker's or a report's
    copy = private / "submissions" / sub.name
    cmd = [sys.executable, "-I", str(ROOT / "grader" / "__main__.py"), "--submission", str(copy),
           "--quiet", "--json", str(made["json"]), "--markdown", str(made["md"]),
           "--completion-marker", str(marker), "--exercises", ",".join(exercises),
           "--sandbox" if args.sandbox else "--no-sandbox",
           # the grader's own measurements (SDPA baselines, ceilings) once for the whole batch
           "--measurements", str(out / "measurements.json")]
    if args.layers:
        cmd += ["--layers", ",".join(args.layers)]
    if args.no_hidden:
        cmd.append("--no-hidden")
    if cpus:
        cmd += ["--cpus", cpu_text(cpus)]
    env = dict(os.environ)
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpu
    row = {"submission": sub.name}
    try:
        copy_sources(sub, copy)
        try:
            proc = subprocess.run(cmd, cwd=private, env=env, input=nonce + "\n", capture_output=True,
                                  text=True, timeout=args.timeout)
            why = f"exit {proc.returncode}: {(proc.stderr.strip().splitlines() or [''])[-1][:200]}"
            ok = proc.returncode == 0 and completed(marker, nonce, made.values())
        except subprocess.TimeoutExpired:
            ok, why = False, f"stopped after {args.timeout:.0f} s"
        if not ok:
            return {**row, "note": f"grading failed ({why}); grade this submission alone"}
        report = json.loads(made["json"].read_text())
        for key, path in made.items():
            os.replace(path, final[key])
    finally:
        with contextlib.suppress(OSError):
            copy.chmod(0o700)   # copy_sources leaves it read-only
        shutil.rmtree(private, ignore_errors=True)
    for ex in exercises:
        row[ex] = score_cell(sum(t["score"] for t in report["tests"] if t["exercise"] == ex))
    return {**row, "total": score_cell(report["score"]), "max": score_cell(report["max_score"]),
            "note": "",
            "undecided": " ".join(t["name"] for t in report["tests"] if t.get("undecided"))}


def completed(marker: Path, nonce: str, reports) -> bool:
    """The grader's completion marker holds this nonce and the SHA-256 of every report."""
    try:
        lines = marker.read_text().splitlines()
        digests = dict(reversed(line.split("  ", 1)) for line in lines[1:])
        return (bool(lines) and secrets.compare_digest(lines[0], nonce)
                and all(not Path(p).is_symlink() and digests.get(str(Path(p).resolve()))
                        == hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in reports))
    except (OSError, ValueError, UnicodeDecodeError):
        return False


def grade_all(args) -> int:
    directory = Path(args.submissions)
    if not directory.is_dir():
        print(f"grader batch: no such folder: {directory}", file=sys.stderr)
        return 2
    out = Path(args.out or "batch").resolve()   # the graders run in the repo root
    (out / "reports").mkdir(parents=True, exist_ok=True)
    exercises = args.exercises or list(EXERCISES)
    subs = find_submissions(directory, args.shard)
    wants_gpu = args.layers is None or bool({"gpu", "perf"} & set(args.layers))
    chosen = choose_gpus(args, wants_gpu)
    if isinstance(chosen, str):
        print(f"grader batch: {chosen}", file=sys.stderr)
        return 2
    gpus, jobs = chosen
    header, book = columns(exercises), out / "gradebook.csv"
    kept, others, selected = {}, {}, selection(args, exercises)
    if args.again:
        everyone = {sub.name for sub in find_submissions(directory, None)}
        found = rows_that_stand(book, header, out, selected, everyone, subs)
        if isinstance(found, str):
            print(f"grader batch: --again: {found}", file=sys.stderr)
            return 2
        kept, others = found
        print(f"grader batch: --again: rows kept from {book}: {len(kept)}; submissions to "
              f"grade: {len(subs) - len(kept)}"
              + (f"; rows of submissions outside --shard, as they were: {len(others)}"
                 if others else ""), file=sys.stderr)
    write_selection(out, selected)
    subs = [sub for sub in subs if sub.name not in kept]
    args.jobs = jobs              # grades at once (--gpus sets it)
    pin = bool(gpus)              # one GPU per job: with more jobs than GPUs, jobs wait for one
    free: queue.Queue = queue.Queue()
    for gpu in gpus:
        free.put(gpu)
    shares: queue.Queue = queue.Queue()   # each grade running gets a share of the cores
    sharing = core_shares(jobs)           # (none with one grade at a time: it takes them all)
    for share in sharing:
        shares.put(share)
    if pin:
        print(f"grader batch: GPUs {', '.join(gpus)}, one submission on each at a time",
              file=sys.stderr)
    began, done, lock = time.perf_counter(), [0], threading.Lock()
    rows = [*others.values(), *kept.values()]

    def run(sub: Path) -> dict:
        gpu = free.get() if pin else None
        cpus = shares.get() if sharing else None
        start = time.perf_counter()
        try:
            row = grade_one(sub, out, args, exercises, gpu, cpus)
        finally:
            if gpu is not None:
                free.put(gpu)
            if cpus is not None:
                shares.put(cpus)
        result = row["note"] or f"{row['total']}/{row['max']}"
        with lock:   # the gradebook as it stands, so a batch stopped now keeps this row
            done[0] += 1
            progress = eta(done[0], len(subs), time.perf_counter() - began)
            rows.append(row)
            write_gradebook(book, header, rows)
        print(f"{sub.name}: {result} ({time.perf_counter() - start:.0f} s"
              + (f", GPU {gpu}" if gpu is not None else "") + f"); {progress}", flush=True)
        return row

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(run, subs))
    write_gradebook(book, header, rows)
    print(f"gradebook: {book} ({len(rows)} submissions"
          + (f", {len(kept)} of them kept from before" if kept else "") + ")")
    from grader.report import class_view

    page, table = class_view.write(out, rows)
    print(f"class view: {page} and {table}")
    return 0




def main(argv: list[str]) -> int:
    try:
        args = parser().parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    if args.merge:
        missing = [p for p in args.merge if not Path(p).is_file()]
        if missing or args.submissions:
            print("grader batch: --merge takes gradebook files only"
                  + (f"; no such file: {', '.join(missing)}" if missing else ""), file=sys.stderr)
            return 2
        return merge(args.merge, Path(args.out or "gradebook.csv"))
    if not args.submissions:
        print("grader batch: give SUBMISSIONS_DIR, or --merge CSV... (see --help)", file=sys.stderr)
        return 2
    return grade_all(args)
