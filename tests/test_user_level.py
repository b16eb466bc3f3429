"""The "user" isolation level (issue 24): root whose namespaces are refused, as in a container with
Docker's default capabilities. The grader runs under `capsh --drop=cap_sys_admin` (so
`unshare --mount` really fails) and still isolates student code: a uid of its own, file
permissions, rlimits. Judged by effect, with the attacks of tests/attacks/ that a user of its own
must stop: reading solutions/ and hidden_tests/, forging the reports and killing the grader, a
process that outlives the grade, a classmate's submission, planting modules in the grader.

What this machine needs opened for a test, and why (each in a mount namespace of the test's own,
nothing changed outside it):
  - the interpreter lives under /root (pyenv), 0700: the test mounts a 0755 tmpfs on /root with
    only the interpreter's folder bound back, as an instructor would install Python for other
    users (on Gradescope it is /usr/bin/python3 and /autograder/venv);
  - the checkouts' solutions/ and hidden_tests/ (this one, and any other copy of the lab on the
    machine, such as a developer's checkout beside CI's clone) are world-readable here, as any file an
    instructor leaves so: they are hidden, as on Gradescope, where only the grader's folder
    (closed to the student, and checked to be) holds them.
Where capsh, unshare or root is missing, the tests are skipped with the reason.
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers import ROOT, grader_without_audit

ATTACKS = ROOT / "tests" / "attacks"
MARKER = "LAB-ATTACK-MARKER"
CANARY_SOL = "CANARY-SOLUTION-5d1e"
CANARY_HIDDEN = "CANARY-HIDDEN-0b7a"
ARGS = ["--exercises", "online_softmax", "--layers", "cpu", "--no-hidden", "--quiet"]
# the attacks a user of its own stops (escape_tools only where the level has a network namespace:
# it tries to reach an outside address)
CASES = ["read_solutions", "print_hidden", "forge_and_kill", "outlive", "classmate",
         "backdoor_grader", "escape_tools"]

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("capsh") or not shutil.which("unshare"),
    reason="needs root, capsh (libcap2-bin) and unshare, to play a container without CAP_SYS_ADMIN")


def _closed_ancestor(path: Path) -> tuple[Path, str] | None:
    """The first folder on the way to `path` that other users may not traverse, and the name
    below it on that way."""
    parts = path.parts
    for i in range(1, len(parts) - 1):
        folder = Path(*parts[:i + 1])
        if not folder.stat().st_mode & 0o001:
            return folder, parts[i + 1]
    return None


@functools.lru_cache(maxsize=1)
def _checkouts() -> frozenset[Path]:
    """This checkout, the interpreter's, and any other copy of the lab on this machine a few
    folders below the root (a developer's checkout beside CI's clone): the attacks look there."""
    found = {ROOT, Path(sys.prefix).resolve().parent}
    level = [Path("/")]
    for _ in range(3):   # folders go and come meanwhile (other tests' temporary ones): no error
        below = []
        for folder in level:
            try:
                with os.scandir(folder) as entries:
                    below += [Path(e.path) for e in entries if e.is_dir(follow_symlinks=False)
                              and e.path not in ("/proc", "/sys", "/dev")]
            except OSError:
                continue
        found |= {f for f in below if (f / "solutions" / "online_softmax.py").is_file()}
        level = below
    return frozenset(found)


def student_view(cmd: list[str], stash: Path) -> list[str]:
    """`cmd` in a mount namespace of its own where the interpreter is reachable by other users
    and the checkouts' solutions/ and hidden_tests/ are hidden (see the module's docstring),
    then without CAP_SYS_ADMIN."""
    script = ["set -e"]
    closed = _closed_ancestor(Path(os.path.realpath(sys.executable)))
    if closed is not None:
        folder, name = closed
        stash.mkdir(exist_ok=True)
        script += [f"mount --bind {shlex.quote(str(folder / name))} {shlex.quote(str(stash))}",
                   f"mount -t tmpfs -o mode=0755 tmpfs {shlex.quote(str(folder))}",
                   f"mkdir {shlex.quote(str(folder / name))}",
                   f"mount --bind {shlex.quote(str(stash))} {shlex.quote(str(folder / name))}"]
    for checkout in _checkouts():
        for secret in ("solutions", "hidden_tests"):
            if (checkout / secret).is_dir():
                script.append(f"mount -t tmpfs -o mode=0700 tmpfs {shlex.quote(str(checkout / secret))}")
    script.append('exec capsh --drop=cap_sys_admin -- -c \'exec "$@"\' capsh "$@"')
    return [shutil.which("unshare"), "--mount", "--propagation", "private", "--", "sh", "-c", "\n".join(script),
            "student-view", *cmd]


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    """A copy of the repo's grading parts in a folder closed to other users (pytest's, 0700), with
    canaries in what students must never see."""
    copy = tmp_path_factory.mktemp("repo")
    for name in ("grader", "solutions", "hidden_tests", "exercises"):
        shutil.copytree(ROOT / name, copy / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    with open(copy / "solutions" / "online_softmax.py", "a") as f:
        f.write(f"\n# {CANARY_SOL}\n")
    (copy / "hidden_tests" / "canary_notes.py").write_text(f"# {CANARY_HIDDEN}\n")
    return copy


def run(cmd: list[str], repo: Path, tmp_path: Path, **env) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    full_env.update(GRADER_TIMEOUT_SCALE="0.1", GRADER_SANDBOX="1", **env)
    return subprocess.run(student_view(cmd, tmp_path / "stash"), cwd=repo, capture_output=True,
                          text=True, timeout=300, env=full_env)


def level_in(repo: Path, tmp_path: Path, **env) -> dict:
    code = ("import json; from grader.sandbox import isolation; l = isolation.choose(); "
            "print(json.dumps({'name': l.name, 'description': l.description, 'unshare': l.unshare}))")
    proc = run([sys.executable, "-I", "-c", f"import sys; sys.path.append({str(repo)!r}); {code}"],
               repo, tmp_path, **env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_namespaces_refused_as_root_gives_the_user_level(repo, tmp_path):
    level = level_in(repo, tmp_path)
    assert level["name"] == "user", level
    assert "no_new_privs" in level["description"] and "uid 6" in level["description"]


def test_solutions_score_full_marks_and_the_report_names_the_level(repo, tmp_path):
    out = tmp_path / "r.json"
    proc = run([sys.executable, "-I", str(repo / "grader" / "__main__.py"), "--submission",
                str(repo / "solutions"), "--json", str(out), *ARGS], repo, tmp_path)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(out.read_text())
    assert report["isolation"].startswith("user:"), report["isolation"]
    assert report["totals"]["score"] == report["totals"]["max_score"] > 0
    assert not report["grading_failed"]


def no_unshare(tmp_path) -> dict:
    """A PATH whose `unshare` fails: no namespaces at all, not even the student's own user
    namespace (as under Docker's seccomp profile, or in a chroot)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "unshare").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "unshare").chmod(0o755)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}"}


@pytest.mark.parametrize("namespaces", ["student's own", "none"])
@pytest.mark.parametrize("case", CASES)
def test_attack_gains_nothing_at_the_user_level(case, namespaces, repo, tmp_path):
    env = no_unshare(tmp_path) if namespaces == "none" else {}
    if case == "escape_tools" and not level_in(repo, tmp_path, **env)["unshare"]:
        pytest.skip("the user level has no network namespace here: the attack would reach out")
    subs = tmp_path / "subs"
    attacker = subs / "mallory"
    attacker.mkdir(parents=True)
    shutil.copytree(repo / "solutions", subs / "alice")    # a classmate with full marks
    report = tmp_path / "reports" / "report.json"
    report.parent.mkdir()
    for source in sorted((ATTACKS / case).glob("*.py")):
        text = source.read_text().replace("__REPO__", str(repo)).replace("__REPORT__", str(report))
        (attacker / source.name).write_text(text.replace("__SUBS__", str(subs)))
    before = sorted(str(p.relative_to(repo)) for p in repo.rglob("*") if "__pycache__" not in p.parts)
    proc = run([*grader_without_audit(repo), "--submission", str(attacker), "--json", str(report), *ARGS],
               repo, tmp_path, **env)
    assert proc.returncode == 0, f"grader exited {proc.returncode}:\n{proc.stderr}"
    written = report.read_text()
    time.sleep(1.0)   # outlive rewrites the report every 0.5 s, if it is still running
    assert report.read_text() == written, "the report changed after the grader exited"
    data = json.loads(written)
    assert data["isolation"].startswith("user:"), data["isolation"]
    assert ("namespaces" in data["isolation"].split(";")[0]) == (namespaces != "none"), data["isolation"]
    checks = [t for t in data["tests"] if t["status"] != "not_run"]
    assert checks and all(t["score"] == 0 for t in checks), [(t["name"], t["message"][:80]) for t in checks]
    assert "grader error" not in written and "forged" not in written
    for secret in (CANARY_SOL, CANARY_HIDDEN):
        assert secret not in written, f"{secret} leaked into the report"
    after = sorted(str(p.relative_to(repo)) for p in repo.rglob("*") if "__pycache__" not in p.parts)
    assert after == before, "something was planted in the grader's folder"
    assert not _marked_processes(), "a process the attack started is still running"
    for p in ("/dev/shm/lab_planted.py", "/tmp/lab_planted.py", "/var/tmp/lab_planted.py"):
        assert not Path(p).exists(), f"{p} was left for the next run"


# Without a PID or mount namespace, what the last worker leaves is the level's to clear: a
# process in a session of its own, files in the machine's /tmp, /var/tmp and /dev/shm (no
# network, unlike tests/attacks/escape_tools)
LINGER = f"""
import os, subprocess
subprocess.Popen(["/bin/sh", "-c", "sleep 60", "{MARKER}"], start_new_session=True)
for path in ("/dev/shm/lab_planted.py", "/tmp/lab_planted.py", "/var/tmp/lab_planted.py"):
    with open(path, "w") as f:
        f.write("PLANTED = True")


def softmax_safe(x):
    raise NotImplementedError


online_max_sum = softmax_online = merge = softmax_safe
"""


def test_nothing_outlives_the_last_worker_without_namespaces(repo, tmp_path):
    attacker = tmp_path / "linger"
    attacker.mkdir()
    (attacker / "online_softmax.py").write_text(LINGER)
    report = tmp_path / "r.json"
    proc = run([*grader_without_audit(repo), "--submission", str(attacker), "--json", str(report), *ARGS],
               repo, tmp_path, **no_unshare(tmp_path))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(report.read_text())
    assert data["isolation"].startswith("user:") and "no namespaces" in data["isolation"]
    assert all(t["score"] == 0 for t in data["tests"] if t["status"] != "not_run")
    assert not _marked_processes(), "the student's process outlived the grade"
    for p in ("/dev/shm/lab_planted.py", "/tmp/lab_planted.py", "/var/tmp/lab_planted.py"):
        assert not Path(p).exists(), f"{p} was left for the next run"


def _marked_processes() -> list[int]:
    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            if MARKER.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(int(pid))
        except OSError:
            pass
    return found


def test_a_grader_folder_open_to_the_student_is_not_a_grade(tmp_path):
    """The user level checks, as the student, that the grader's folder is closed to it; where it
    is open (and namespaces are refused), no level is acceptable: the run is not a grade, and
    says why."""
    open_repo = Path("/tmp") / f"lab-open-repo-{os.getpid()}"
    shutil.rmtree(open_repo, ignore_errors=True)
    for name in ("grader", "solutions"):
        shutil.copytree(ROOT / name, open_repo / name, ignore=shutil.ignore_patterns("__pycache__"))
    os.chmod(open_repo, 0o755)
    try:
        out = tmp_path / "r.json"
        proc = run([sys.executable, "-I", str(open_repo / "grader" / "__main__.py"), "--submission",
                    str(open_repo / "solutions"), "--json", str(out), *ARGS], open_repo, tmp_path)
        assert proc.returncode == 3, proc.stderr
        report = json.loads(out.read_text())
        assert report["grading_failed"] and "is open to uid" in report["grading_failed"], report["grading_failed"]
        assert "os isolation:" in report["grading_failed"] and "unavailable" in report["grading_failed"]
    finally:
        shutil.rmtree(open_repo, ignore_errors=True)


def test_two_graders_at_once_get_two_uids():
    """Each grader process holds its uid while it runs (a lock), so two grades at the user level
    at once (`batch --jobs 2`) never share a user: no reading each other's scratch, no reaping
    each other's workers."""
    code = ("import sys, time; sys.path.append(%r); from grader.sandbox import user_level; "
            "print(user_level.student_ids()[0], flush=True); time.sleep(3)" % str(ROOT))
    procs = [subprocess.Popen([sys.executable, "-I", "-c", code], stdout=subprocess.PIPE, text=True)
             for _ in range(2)]
    try:
        uids = [int(p.stdout.readline()) for p in procs]
    finally:
        for p in procs:
            p.kill()
            p.wait()
    assert uids[0] != uids[1] and all(61000 <= u < 65000 for u in uids), uids
