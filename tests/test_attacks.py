"""Hostile submissions (tests/attacks/) gain nothing and break nothing (issue 8).

Each attack is graded from a throwaway copy of the repo (grader/, solutions/, hidden_tests/,
exercises/), so a successful attack cannot damage this checkout. For each: online_softmax scores
what the stubs score (0); the CLI exits 0 and writes the grader's own report; the copy's tree is
unchanged (hashed before and after); no process the attack started is left running; and after
all of them, the stubs graded again in the same copy score 0; nothing secret (canaries planted
in solutions/ and hidden_tests/) appears in the report.

Cases marked `os` need the "os" isolation level (root and `unshare`, as in CI); elsewhere they
are skipped with the reason. The others hold at every level.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import ROOT, grader_without_audit

ATTACKS = ROOT / "tests" / "attacks"
MARKER = "LAB-ATTACK-MARKER"
CANARY_SOL = "CANARY-SOLUTION-7f3a"
CANARY_HIDDEN = "CANARY-HIDDEN-91c2"
ARGS = ("--exercises", "online_softmax", "--layers", "cpu", "--no-hidden")

# case -> (needs the os level, statuses allowed for online_softmax's checks, or None for any;
# one_pass is advice, so whatever stops it reads "advice", worth 0 like the rest)
CASES = {
    "forge_and_kill": (True, None),
    "outlive": (True, None),
    "backdoor_grader": (True, None),
    "read_solutions": (True, None),
    "print_hidden": (True, None),
    "classmate": (True, None),
    "escape_tools": (True, None),
    "fork_bomb": (True, {"timeout", "crashed", "error", "advice"}),
    "userns_escape": (True, None),
    "hang_reply": (False, {"timeout", "advice"}),
    "forge_reply": (False, {"crashed", "error", "advice"}),
    "flood": (False, {"error", "not_implemented", "crashed", "advice"}),
    "codec_bomb": (False, {"error", "advice"}),
    "library_import": (False, None),
    "alias_fork": (False, None),
    "thread_allowed_module": (False, None),
    "process_allowed_module": (False, None),
    "exec_tool": (False, None),
    "fill_disk": (True, {"error", "failed", "advice"}),
}


def _level() -> str:
    from grader.sandbox import isolation

    return isolation.choose().name


def _pids_cgroup():
    from grader.sandbox import cgroups

    return cgroups.cgroup_base("pids")


ATTACKED: list[str] = []   # the cases graded so far in this run, in the module's copy of the repo


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    """A copy of the repo's grading parts, with canaries in what students must never see."""
    copy = tmp_path_factory.mktemp("repo")
    for name in ("grader", "solutions", "hidden_tests", "exercises"):
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, copy / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    with open(copy / "solutions" / "online_softmax.py", "a") as f:
        f.write(f"\n# {CANARY_SOL}\n")
    (copy / "hidden_tests").mkdir(exist_ok=True)
    (copy / "hidden_tests" / "canary_notes.py").write_text(f"# {CANARY_HIDDEN}\n")
    return copy


def tree_hash(root: Path) -> str:
    h = hashlib.sha256()
    for name in ("grader", "solutions", "hidden_tests", "exercises"):
        for path in sorted((root / name).rglob("*")):
            if "__pycache__" in path.parts or path.suffix == ".pyc":
                continue
            h.update(str(path.relative_to(root)).encode())
            if path.is_file() or path.is_symlink():
                h.update(path.read_bytes() if path.is_file() else os.readlink(path).encode())
    for path in sorted(root.iterdir()):   # nothing planted next to the packages
        h.update(path.name.encode())
    return h.hexdigest()


def run_grader(repo: Path, submission: Path, report: Path, timeout: float = 300,
               sandbox: bool = False, audit: bool = False) -> subprocess.CompletedProcess:
    """`sandbox`: the grader must run student code at the os level or not at all. Attacks that
    only the os level stops are always graded so: unsandboxed, they would write into the
    interpreter's own folders (sys.path) on the machine running the tests.
    `audit`: the static audit (grader.judge.source.audit) refuses most attacks before they run, so
    they are graded with it off: what is proven here is that the sandbox and the launcher hold
    on their own, against an attack that got past the audit."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.update(GRADER_TIMEOUT_SCALE="0.1")
    if sandbox:
        env["GRADER_SANDBOX"] = "1"
    start = ([sys.executable, "-I", str(repo / "grader" / "__main__.py")] if audit
             else grader_without_audit(repo))
    return subprocess.run([*start, "--submission", str(submission),
                           "--json", str(report), "--quiet", *ARGS],
                          cwd=repo, capture_output=True, text=True, timeout=timeout, env=env)


def marked_processes() -> list[int]:
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if MARKER.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found


def online(report: dict) -> list[dict]:
    return [t for t in report["tests"] if t["exercise"] == "online_softmax" and t["status"] != "not_run"]


def flood_costs_little_memory(data: dict, elapsed: float) -> None:
    """2 GiB printed: the grader reads a bounded head and tail of the capture file."""
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    assert peak_kib < 1_500_000, f"a process of the run peaked at {peak_kib >> 10} MiB"
    assert all(len(t["output"]) <= 2000 for t in data["tests"])


def codec_bombs_are_named(data: dict, elapsed: float) -> None:
    """Unsendable values are the student's error, with the reason, not a silent worker death."""
    by_name = {t["name"]: t for t in data["tests"]}
    assert "bits" in by_name["online_softmax.safe_matches_float64"]["message"]
    assert "nested too deeply" in by_name["online_softmax.online_max_sum"]["message"]
    assert "too large" in by_name["online_softmax.online_matches_float64"]["message"]
    for t in online(data):
        assert "died" not in t["message"], t


def hanging_reply_times_out_and_counts(data: dict, elapsed: float) -> None:
    """A header that promises parts that never come times out like a hang, and the two-timeout
    rule stops the rest of the exercise at once."""
    assert elapsed < 60
    assert sum("did not finish" in t["message"] for t in online(data)) == 2


# what some cases must show besides gaining nothing
def library_files_are_not_imported(data, elapsed):
    """torch imports opt_einsum by itself: the one beside the exercise file was never copied
    into the sandbox, and the submission folder is last on sys.path anyway."""
    assert MARKER not in json.dumps(data), "the submission's opt_einsum.py ran"


def the_kernel_said_no(data, elapsed):
    """Each of these would earn full marks if its fork, thread, process or exec started (it
    computes the answer only there): the worker's seccomp filter refused it, and the message
    says why (grader/worker/seccomp.py)."""
    assert data["seccomp"] == "cpu: processes+threads", data["seccomp"]
    for t in online(data):
        assert "without threads or processes" in t["message"], t


def scratch_is_bounded(data, elapsed):
    """Each write stopped at the scratch tmpfs's size (grader/sandbox/scratch.py), not at the
    machine's free space: 3 GiB were asked for."""
    from grader.sandbox.scratch import SCRATCH_LIMIT_BYTES

    said = [t["message"] for t in online(data) if "FILLED" in t["message"]]
    assert said, [t["message"][:200] for t in online(data)]
    for message in said:
        mib = int(message.split("FILLED ")[1].split(" MiB")[0])
        assert mib <= SCRATCH_LIMIT_BYTES >> 20 and "No space left" in message, message[:300]


def forged_replies_count_for_nothing(data, elapsed):
    """Every call's forged reply was followed by an exit: the grader's ping after the reply
    found the worker gone, so each call crashed (launched.Launched.request)."""
    said = [t["message"] for t in online(data) if t["status"] != "advice"]
    assert said and all("exited" in m for m in said), said


SHOWS = {"flood": flood_costs_little_memory, "forge_reply": forged_replies_count_for_nothing, "fill_disk": scratch_is_bounded, "codec_bomb": codec_bombs_are_named,
         "library_import": library_files_are_not_imported,
         "hang_reply": hanging_reply_times_out_and_counts,
         **dict.fromkeys(("alias_fork", "thread_allowed_module", "process_allowed_module",
                          "exec_tool"), the_kernel_said_no)}


@pytest.mark.parametrize("case", CASES)
def test_attack_gains_nothing(case, repo, tmp_path):
    needs_os, statuses = CASES[case]
    if case == "fork_bomb" and _pids_cgroup() is None:
        pytest.skip("needs a pids cgroup this process can create (cgroup v1 pids, or v2 with the "
                    "pids controller delegated): without one, a fork bomb is stopped only by the "
                    "sandbox user's RLIMIT_NPROC, shared with every other worker")
    if needs_os and _level() != "os":
        pytest.skip("needs the os isolation level (root and util-linux unshare with PID, mount and "
                    "network namespaces): at the process level a submission runs as the grader's user")
    subs = tmp_path / "subs"
    attacker, classmate = subs / "mallory", subs / "alice"
    attacker.mkdir(parents=True)
    shutil.copytree(repo / "solutions", classmate)      # a classmate with full marks
    report = tmp_path / "reports" / "report.json"
    report.parent.mkdir()
    for source in sorted((ATTACKS / case).glob("*.py")):   # the exercise file, and any beside it
        text = source.read_text().replace("__REPO__", str(repo)).replace("__REPORT__", str(report))
        (attacker / source.name).write_text(text.replace("__SUBS__", str(subs)))
    before = tree_hash(repo)
    for p in ("/dev/shm/lab_planted.py", "/tmp/lab_planted.py"):
        Path(p).unlink(missing_ok=True)

    start = time.perf_counter()
    proc = run_grader(repo, attacker, report, sandbox=needs_os)
    elapsed = time.perf_counter() - start
    assert proc.returncode == 0, f"grader exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    written = report.read_text()
    time.sleep(1.0)   # a process left behind would rewrite the report now (outlive: every 0.5 s)
    assert report.read_text() == written, "the report changed after the grader exited"
    data = json.loads(written)
    assert data["tests"] and data["score"] == pytest.approx(sum(t["score"] for t in data["tests"]))
    checks = online(data)
    assert checks and all(t["score"] == 0 for t in checks), [(t["name"], t["status"]) for t in checks]
    assert not any("audit" in t["message"] for t in checks), "the attack did not run past the audit"
    if statuses is not None:
        assert {t["status"] for t in checks} <= statuses, [(t["name"], t["status"], t["message"]) for t in checks]
    for secret in (CANARY_SOL, CANARY_HIDDEN):
        assert secret not in written, f"{secret} leaked into the report"
    assert "grader error" not in written
    assert elapsed < 120, f"grading took {elapsed:.0f} s"
    if case in SHOWS:
        SHOWS[case](data, elapsed)

    assert tree_hash(repo) == before, "the grader's tree changed"
    assert not marked_processes(), "a process the attack started is still running"
    for p in ("/dev/shm/lab_planted.py", "/tmp/lab_planted.py"):
        assert not Path(p).exists(), f"{p} was left for the next run"
    ATTACKED.append(case)


def test_stubs_still_score_zero_after_the_attacks(repo, tmp_path):
    """After every attack above, graded in this same copy of the repo (each was already proven
    not to change its tree or plant files in /tmp and /dev/shm), the stubs graded with the real
    command line still score 0: nothing an attack left behind anywhere raises a later grade.
    One grade after all of them rather than one after each keeps the corpus fast."""
    if not ATTACKED:
        pytest.skip("no attack was graded in this run (run it with the attacks)")
    stubs = tmp_path / "stubs.json"
    again = run_grader(repo, repo / "exercises", stubs, audit=True)
    assert again.returncode == 0, again.stderr
    checks = online(json.loads(stubs.read_text()))
    assert checks and all(t["score"] == 0 for t in checks), (ATTACKED, checks)


def test_symlinked_submission_reads_nothing(repo, tmp_path):
    """A submission file that is a link to the solution (an upload that kept a symlink) is not
    followed: only plain files are copied into the sandbox."""
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "online_softmax.py").symlink_to(repo / "solutions" / "online_softmax.py")
    proc = run_grader(repo, sub, tmp_path / "r.json", audit=True)
    assert proc.returncode == 0, proc.stderr
    tests = online(json.loads((tmp_path / "r.json").read_text()))
    assert tests and all(t["score"] == 0 and "not submitted" in t["message"] for t in tests)


# ------------------------------------------------------------------ student code outside the grader
# compute-sanitizer runs the worker through the launcher like any other; on a CPU a stand-in
# tool (same command line, writes a clean log, passes the worker's exit status on) drives it.
# On a GPU, `make grade-gpu IMPL=solutions` runs the real one.

FAKE_SANITIZER = ["/bin/sh", "-c", 'while [ "$#" -gt 0 ]; do case "$1" in --log-file) log="$2"; '
                  'shift 2;; --*) shift 2;; *) break;; esac; done; "$@"; rc=$?; '
                  'echo "========= ERROR SUMMARY: 0 errors" > "$log"; exit $rc', "fake-sanitizer"]


@pytest.mark.parametrize("case", ["sanitize_exit", "sanitize_forge"])
def test_sanitizer_verdict_comes_from_the_tools(case, tmp_path, monkeypatch):
    pytest.importorskip("triton")
    from grader import errors
    from grader.judge.answers.compare import CheckFailed
    from grader.judge.evidence import sanitize

    monkeypatch.setenv("GRADER_TIMEOUT_SCALE", "0.1")
    sub = tmp_path / "sub"
    sub.mkdir()
    shutil.copy(ATTACKS / case / "softmax_triton.py", sub)
    with pytest.raises((errors.StudentProblem, CheckFailed)):
        sanitize.memcheck(sub, "softmax_triton", tool=FAKE_SANITIZER, mode="interp")


@pytest.mark.parametrize("cheat", ["torch_softmax", "sdpa_with_dummy_launch"])
def test_sanitizer_points_need_the_students_kernel(cheat, tmp_path):
    """PyTorch computing the answer (beside a dummy launch) earned the sanitizer's points on the
    H200: the checked call under the tool is traced like every gated call."""
    pytest.importorskip("triton")
    from grader.judge.answers.compare import CheckFailed
    from grader.judge.evidence import sanitize
    from tests.cases import case, folder_files

    sub = tmp_path / "sub"
    sub.mkdir()
    for name, text in folder_files(case("cheats", cheat)).items():
        (sub / name).write_text(text)
    exercise = "softmax_triton" if cheat == "torch_softmax" else "flash_triton"
    with pytest.raises(CheckFailed, match="launched no Triton kernel|computed with PyTorch"):
        sanitize.memcheck(sub, exercise, tool=FAKE_SANITIZER, mode="interp")


def test_sanitizer_passes_a_correct_kernel(tmp_path):
    pytest.importorskip("triton")
    from grader.judge.evidence import sanitize

    summary = sanitize.memcheck(ROOT / "solutions", "softmax_triton", tool=FAKE_SANITIZER, mode="interp")
    assert "ERROR SUMMARY: 0 errors" in summary


# a stand-in for memcheck stopping a kernel at a bad access: the app's call fails, the tool logs
# the error and exits with --error-exitcode
FAKE_SANITIZER_FINDS = ["/bin/sh", "-c", 'while [ "$#" -gt 0 ]; do case "$1" in --log-file) log="$2"; '
                        'shift 2;; --error-exitcode) code="$2"; shift 2;; --*) shift 2;; *) break;; '
                        'esac; done; "$@"; echo "========= Invalid __global__ write of size 2 bytes" '
                        '> "$log"; echo "========= ERROR SUMMARY: 1 error" >> "$log"; exit $code',
                        "fake-sanitizer"]


def test_sanitizer_verdict_when_the_checked_call_fails(tmp_path):
    """memcheck aborts the kernel at its first bad access, so the student's call raises ("unspecified
    launch failure", seen on the H200): the verdict is still the tool's, with its message."""
    pytest.importorskip("triton")
    from grader.judge.answers.compare import CheckFailed
    from grader.judge.evidence import sanitize

    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "softmax_triton.py").write_text(
        "def softmax(x):\n    raise RuntimeError('CUDA error: unspecified launch failure')\n")
    with pytest.raises(CheckFailed, match="compute-sanitizer found 1 memory error"):
        sanitize.memcheck(sub, "softmax_triton", tool=FAKE_SANITIZER_FINDS, mode="interp")


def _gpu_sanitizer() -> bool:
    try:
        import torch

        from grader.judge.evidence import sanitize
    except ImportError:
        return False
    return torch.cuda.is_available() and sanitize.sanitizer_path() is not None


@pytest.mark.skipif(not _gpu_sanitizer(), reason="needs a CUDA GPU and compute-sanitizer")
def test_sanitizer_under_isolation_on_the_gpu(tmp_path):
    """On the GPU (one command: python -m pytest tests/test_attacks.py -q -k gpu): the real
    compute-sanitizer through the launcher, at whatever level this run has: the solutions pass,
    an exit at import and an unmasked store do not."""
    from grader import errors
    from grader.judge.answers.compare import CheckFailed
    from grader.sandbox import isolation
    from grader.judge.evidence import sanitize

    print("isolation:", isolation.choose().description)
    for exercise in ("softmax_triton", "flash_triton"):
        assert "ERROR SUMMARY: 0 errors" in sanitize.memcheck(ROOT / "solutions", exercise)
    exits = tmp_path / "exits"
    exits.mkdir()
    shutil.copy(ATTACKS / "sanitize_exit" / "softmax_triton.py", exits)
    with pytest.raises(errors.StudentProblem):
        sanitize.memcheck(exits, "softmax_triton")
    unmasked = tmp_path / "unmasked"
    unmasked.mkdir()
    text = (ROOT / "solutions" / "softmax_triton.py").read_text()
    store = "y.to(out_ptr.dtype.element_ty), mask=mask)"
    assert store in text
    (unmasked / "softmax_triton.py").write_text(text.replace(store, "y.to(out_ptr.dtype.element_ty))"))
    with pytest.raises(CheckFailed) as caught:
        sanitize.memcheck(unmasked, "softmax_triton")
    print(caught.value)


# ------------------------------------------------------------------ one launcher

# The contract: grader/sandbox/launcher.py (with the isolation step it execs) is the only code
# that starts a process running submission code. Anything else in grader/ or tools/ may start a
# process only as `subprocess.run(CMD, ...)` (it waits: nothing outlives the call), where CMD is
#   - a tool query: `[TOOL, "--flag", ...]`, a list written in the call whose arguments are all
#     string constants, so no path of a submission can reach it (nvidia-smi, compute-sanitizer
#     --help); or
#   - the grader's own command line: `[sys.executable, ..., "grader"/__main__.py, ...]`, written
#     in the call or bound to a name in the same function; that grader starts student code only
#     through its launcher (batch, release, tools/gpu_*).
# Every other way to start a process (Popen, os.fork/exec/spawn/system/popen, multiprocessing,
# pty, `from subprocess import ...`) is an offence outside the launcher.
# the launcher and the isolation it sets up (confine: the trusted step that execs the worker;
# user_level: a probe run as the student's uid before any student code; start_trusted: the
# grader's own `python -I -c CODE`, the bytecode builder), and
# the tool that runs whole Gradescope containers around the grader
LAUNCHER = {"grader/sandbox/launcher.py", "grader/sandbox/isolation.py", "grader/sandbox/confine.py",
            "grader/sandbox/user_level.py", "tools/gradescope_root.py"}
PROCESS_MODULES = ("subprocess", "multiprocessing", "pty", "asyncio.subprocess")
STARTS = {"subprocess": {"run", "Popen", "call", "check_call", "check_output", "getoutput",
                         "getstatusoutput"},
          "os": {"system", "popen", "fork", "forkpty", "execv", "execve", "execvp", "execvpe", "execl",
                 "execle", "execlp", "execlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe", "spawnl",
                 "spawnle", "spawnlp", "spawnlpe", "posix_spawn", "posix_spawnp"},
          "multiprocessing": {"Process", "Pool", "get_context", "set_start_method"},
          "pty": {"spawn", "fork"},
          "asyncio": {"create_subprocess_exec", "create_subprocess_shell"},
          "futures": {"ProcessPoolExecutor"}}


def _is_sys_executable(node) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "executable"
            and isinstance(node.value, ast.Name) and node.value.id == "sys")


def _runs_the_grader(items: list) -> bool:
    """`[sys.executable, ...]` naming the grader: `-m grader` or a path ending in __main__.py
    of the grader package (`ROOT / "grader" / "__main__.py"`, "grader/__main__.py"), or its
    parallel_part.py (one grading process of a parallel grade, grader.parallel); or `*grader_command(...)`
    first, tests.helpers' make command line (a part of the grader switched off for a test)."""
    if items and isinstance(items[0], ast.Starred) and isinstance(items[0].value, ast.Call) \
            and getattr(items[0].value.func, "id", "") == "grader_command":
        return True
    if not items or not _is_sys_executable(items[0]):
        return False
    consts = [c.value for item in items for c in sorted(
        (c for c in ast.walk(item) if isinstance(c, ast.Constant) and isinstance(c.value, str)),
        key=lambda c: (c.lineno, c.col_offset))]
    module = any(a == "-m" and b == "grader" for a, b in zip(consts, consts[1:]))
    script = "grader/__main__.py" in consts or any(
        a == "grader" and b in ("__main__.py", "parallel_part.py") for a, b in zip(consts, consts[1:]))
    return module or script


def _is_tool_query(items: list) -> bool:
    """`[TOOL, "--flag", ...]`: the program is not Python, every argument a string constant."""
    return (bool(items) and not _is_sys_executable(items[0])
            and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in items[1:]))


def _command(call: ast.Call, scope) -> tuple[list, bool]:
    """The command's list elements, and whether the list is written in the call itself."""
    cmd = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "args"), None)
    if isinstance(cmd, ast.List):
        return cmd.elts, True
    if isinstance(cmd, ast.Name):
        for node in ast.walk(scope):
            if (isinstance(node, ast.Assign) and isinstance(node.value, ast.List)
                    and any(isinstance(t, ast.Name) and t.id == cmd.id for t in node.targets)):
                return node.value.elts, False
    return [], False


def process_offences(rel: str, tree: ast.AST) -> list[str]:
    offences = []
    scopes = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]

    def scope_of(node):
        inner = [f for f in scopes if f.lineno <= node.lineno <= (f.end_lineno or f.lineno)]
        return max(inner, key=lambda f: f.lineno) if inner else tree

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PROCESS_MODULES) \
                and node.module != "multiprocessing.connection":   # the pipe's class only
            offences.append(f"{rel}:{node.lineno} from {node.module} import ...")
        if any(getattr(a, "name", "") == "ProcessPoolExecutor" for a in getattr(node, "names", ())):
            offences.append(f"{rel}:{node.lineno} ProcessPoolExecutor")   # threads are fine
        if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.attr in STARTS.get(node.value.id, ())):
            continue
        name = f"{node.value.id}.{node.attr}"
        call = next((c for c in ast.walk(tree) if isinstance(c, ast.Call) and c.func is node), None)
        if name not in ("subprocess.run", "subprocess.Popen") or call is None:
            offences.append(f"{rel}:{node.lineno} {name} (only subprocess.run(CMD) outside the launcher)")
            continue
        items, literal = _command(call, scope_of(call))
        if name == "subprocess.Popen" and not _runs_the_grader(items):   # the grader's own only
            offences.append(f"{rel}:{node.lineno} {name} (only subprocess.run(CMD) outside the launcher)")
        elif not (_runs_the_grader(items) or (literal and _is_tool_query(items))):
            offences.append(f"{rel}:{node.lineno} subprocess.run with a command that is neither a tool "
                            "query with constant arguments nor the grader's own command line")
    return offences


def test_only_the_launcher_starts_student_code():
    """No code in grader/ or tools/ but the launcher starts a process that could run submission
    code: elsewhere only tool queries with constant arguments and the grader's own command line
    (see the contract above). the bench's (tools/bench/) student side goes through the launcher too."""
    offenders = []
    for path in sorted([*(ROOT / "grader").rglob("*.py"), *(ROOT / "tools").rglob("*.py")]):
        rel = path.relative_to(ROOT).as_posix()
        if rel not in LAUNCHER:
            offenders += process_offences(rel, ast.parse(path.read_text()))
    assert not offenders, "only grader/sandbox/launcher.py may start student code:\n" + "\n".join(offenders)
    # the worker, which imports submission files, is started by the launcher's boot line only
    for path in [*(ROOT / "grader").rglob("*.py"), *(ROOT / "tools").rglob("*.py")]:
        rel = path.relative_to(ROOT).as_posix()
        if rel not in ("grader/sandbox/launcher.py", "grader/worker/worker.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
                elif isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                else:
                    continue
                assert "grader.worker.worker" not in names, f"{rel}:{node.lineno} imports the worker"


def test_the_process_contract_catches_offences():
    """The contract's checker refuses what it must (each line starts a process that could run a
    submission) and accepts what it allows."""
    bad = ["subprocess.Popen(['nvidia-smi'])", "os.system('nvidia-smi')", "os.fork()",
           "subprocess.run([sys.executable, str(sub / 'x.py')])",
           "subprocess.run(['nvidia-smi', str(sub)])", "subprocess.run(cmd)",
           "subprocess.run([sys.executable, '-c', 'import x'])", "multiprocessing.Process(target=f)",
           "from subprocess import run", "from concurrent.futures import ProcessPoolExecutor"]
    for line in bad:
        assert process_offences("x.py", ast.parse(line)), line
    good = ["subprocess.run(['nvidia-smi', '--query-compute-apps=pid', '--format=csv,noheader'])",
            "from concurrent.futures import ThreadPoolExecutor",
            "subprocess.run([smi, '-L'], timeout=5)",
            "subprocess.run([sys.executable, '-m', 'grader', '--submission', str(s)])",
            "def f(s):\n    cmd = [sys.executable, '-I', str(ROOT / 'grader' / '__main__.py'), str(s)]\n"
            "    cmd += ['--quiet']\n    subprocess.run(cmd)"]
    for line in good:
        assert not process_offences("x.py", ast.parse(line)), line


def test_no_submission_module_in_the_grader_process(tmp_path):
    """After a grade in this process, nothing from the submission was imported here."""
    code = ("import sys; from grader.run import grade; "
            f"grade({str(ROOT / 'solutions')!r}, ['online_softmax', 'tiled_attention'], ['cpu'], False); "
            "bad = [m for m, mod in sys.modules.items() if m in ('online_softmax', 'tiled_attention') "
            f"or {str(ROOT / 'solutions')!r} in str(getattr(mod, '__file__', '') or '')]; "
            "print('LEAKED', bad) if bad else print('CLEAN')")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GRADER_TIMEOUT_SCALE": "0.2"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300, env=env)
    assert "CLEAN" in proc.stdout, proc.stdout + proc.stderr


def test_worker_dies_with_a_killed_grader(tmp_path):
    """A grader killed from outside (an OOM killer, a scheduler) takes its looping workers with
    it: unshare runs under `setpriv --pdeathsig KILL`, and the PID namespace dies with it. (The
    run's folder is given, so it is a plain folder: a killed grader cannot unmount the tmpfs it
    would otherwise be, grader/sandbox/scratch.py.)"""
    if _level() != "os":
        pytest.skip("needs the os isolation level (root and util-linux unshare)")
    from grader.sandbox import isolation

    if not isolation._die_with_grader():
        pytest.skip("util-linux setpriv with --pdeathsig is not installed")
    code = ("import numpy as np, sys; from pathlib import Path; "
            "from grader.sandbox.workers import Workers; "
            f"s = Workers(Path({str(ROOT / 'tests' / 'submissions' / 'hang')!r}), "
            f"Path({str(tmp_path / 'run')!r})).get('online_softmax'); "
            "print(s.worker_pid, flush=True); s.call('softmax_safe', np.ones(3), timeout=300)")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GRADER_SANDBOX": "1"}
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    pid = int(proc.stdout.readline())
    time.sleep(0.5)
    assert Path(f"/proc/{pid}").exists()
    proc.kill()
    proc.wait()
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not Path(f"/proc/{pid}").exists(), "the worker outlived its grader"
