"""python -m tools.gradescope --out dist/autograder.zip: the Gradescope autograder.

Gradescope unpacks the zip into /autograder/source, runs setup.sh there once to build its
image, then run_autograder for every submission (uploaded to /autograder/submission) and reads
/autograder/results/results.json. The zip holds:

    setup.sh          apt python3 + venv, then pip install -r requirements.txt (torch's CPU wheel)
    run_autograder    finds the exercise files in the upload, grades them under the OS sandbox,
                      and keeps results.json only when the grader completed (a nonce check);
                      its stdout (Gradescope's results/stdout) is a short log: the files found,
                      the isolation level, each layer's seconds, grader errors
    gradescope_log.py that log, read from the grader's JSON report
    grader/           the grader and its public checks
    hidden_tests/     the instructor's checks (after_published in results.json)
    requirements.txt, Makefile

run_autograder reads two variables, so a test can run it outside Gradescope: AUTOGRADER_ROOT
(default /autograder; relative paths work from any folder) and PYTHON (default the venv setup.sh
made, else python3); its arguments (Gradescope gives none) go to the grader, e.g.
`run_autograder --layers cpu`. It exits non-zero when no results.json could be written.
"""

from __future__ import annotations

import argparse
import sys
import zipfile
from pathlib import Path

from grader.registry import EXERCISES

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ["grader", "hidden_tests"]
FILES = ["requirements.txt", "Makefile"]

SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, as root, in /autograder/source, when it builds the image.
set -euo pipefail
cd "$(dirname "$0")"
apt-get update -qq
apt-get install -y -qq python3 python3-venv python3-pip > /dev/null
# fail here, loudly, on an interpreter the lab cannot use (README, Versions)
python3 -c 'import sys; v = sys.version_info; sys.exit(v < (3, 10) or v.releaselevel != "final")' || {
    echo "setup.sh: the lab needs a released Python 3.10 or newer; python3 is $(python3 --version 2>&1)" >&2; exit 1; }
python3 -m venv /autograder/venv
pip=/autograder/venv/bin/pip
# PyTorch's CPU wheel first (no GPU on Gradescope; the default wheel brings gigabytes of CUDA).
# LAB_TORCH_INDEX overrides the index, empty for pip's own (a test machine without this one)
torch_index="${LAB_TORCH_INDEX-https://download.pytorch.org/whl/cpu}"
$pip install --quiet ${torch_index:+--index-url "$torch_index"} "$(grep -E '^torch' requirements.txt)"
$pip install --quiet -r requirements.txt
# the unprivileged user student code runs as at the os level (grader/sandbox/isolation.py);
# util-linux's unshare gives it its own PID, mount and network namespaces
id labstudent > /dev/null 2>&1 || useradd --system --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin labstudent
command -v unshare > /dev/null || apt-get install -y -qq util-linux > /dev/null
"""

# the settings docs/INSTRUCTORS.md gives; at Gradescope's defaults (768 MB, half a vCPU) the
# solutions took SLOW_S in the Ubuntu 22.04 root (make gradescope-jammy; docs/INSTRUCTORS.md)
MIN_MB, MIN_CPUS, SLOW_S = 1536, 1.0, 1109

# gradescope_log.py, run_autograder's log (results/stdout): what ran, how, how long; no scores.
# With --failed, the results.json of a run that is not a grade, with the grader's reason if its
# report says one (no sandbox here, a worker that could not start), never a score of 0 in silence
LOG = r"""
import json, os, sys
if sys.argv[1] == "--failed":   # --failed REPORT STATUS
    try:
        why = json.load(open(sys.argv[2])).get("grading_failed") or ""
    except (OSError, ValueError):
        why = ""
    why = why or f"the autograder did not complete (exit {sys.argv[3] if len(sys.argv) > 3 else '?'})"
    print(json.dumps({"score": 0, "tests": [], "output": f"Grading failed: {why}. This result is "
                      "not a grade: please tell the course staff."}))
    sys.exit(0)
r = json.load(open(sys.argv[1]))
sys.path.insert(0, os.getcwd())   # run from $ROOT/source: the grader's own modules
from grader import cli, options
from grader.schedule import cpu_quota
from grader.sandbox.budget import memory_bytes
with options.using(options.from_args(cli.parser().parse_args(sys.argv[2:]))):   # the grader's
    mem, cpus = memory_bytes(), cpu_quota()
short = (mem is not None and mem < (MIN_MB << 20)) or (cpus is not None and cpus < MIN_CPUS)
print(f"resources: memory {f'{mem >> 20} MB' if mem else 'not limited'}, "
      f"CPUs {cpus if cpus is not None else 'not limited'}" + (
      f" (below the {MIN_MB} MB and {MIN_CPUS:g} CPU this autograder is set up for: at 768 MB "
      f"and half a CPU a full submission took {SLOW_S // 60} minutes, past Gradescope's "
      f"default 10-minute timeout)" if short else ""))
print("isolation:", r.get("isolation") or "unknown")
print("layers run:", ", ".join(f"{k} {v:.0f} s" for k, v in r.get("layer_seconds", {}).items()) or "none")
for layer, why in r.get("layers_not_run", {}).items():
    print(f"not run: {layer} ({why})")
for note in r.get("notes", []):
    print("note:", note)
errors = [t["name"] for t in r.get("tests", []) if t["message"].startswith("grader error")]
if errors:
    print(f"grader errors in {len(errors)} checks, the first: {errors[0]}")
print(f"graded in {r.get('elapsed_s', 0):.0f} s")
"""

RUN = """#!/usr/bin/env bash
# Gradescope's entry point: grade the upload in $ROOT/submission, write $ROOT/results/results.json.
# Fail closed: the grader writes into a private folder, and its results.json is moved into place
# only when the grader exited 0 and left a completion marker holding this run's nonce (handed
# over on stdin, never on a command line or in a file) and the SHA-256 of that results.json.
# Anything else (a crash, a kill, a forged file) gives a result that says grading failed.
set -u
# an absolute path, whatever the folder this runs from (a relative AUTOGRADER_ROOT, for a local try)
ROOT="$(cd "${{AUTOGRADER_ROOT:-/autograder}}" 2> /dev/null && pwd -P)" || {{
    echo "run_autograder: no folder ${{AUTOGRADER_ROOT:-/autograder}}" >&2; exit 1; }}
PYTHON="${{PYTHON:-$( [ -x "$ROOT/venv/bin/python" ] && echo "$ROOT/venv/bin/python" || echo python3)}}"
RESULTS="$ROOT/results/results.json"
mkdir -p "$ROOT/results"
rm -rf "$RESULTS"            # nothing that was there before this run counts, file or folder
# the grader, its hidden checks: closed to every other user (the student's, at the "user"
# isolation level, where file permissions are what keeps them; the grader checks it)
chmod 700 "$ROOT/source"
private="$(cd "$(mktemp -d)" && pwd -P)"   # 0700: student code (another user) cannot reach it
work="$(mktemp -d)"
chmod 755 "$work"
# Students upload the files alone, in a folder or in a zip: take each exercise file from wherever
# it is, the shallowest copy first, into a clean folder.
found=""
for ex in {exercises}; do
    f="$(find "$ROOT/submission" -type f -name "$ex.py" -not -path '*/__MACOSX/*' \\
         | awk -F/ '{{ print NF "\\t" $0 }}' | sort -n | head -n 1 | cut -f 2-)"
    if [ -n "$f" ]; then cp "$f" "$work/$ex.py"; found="$found ${{f#$ROOT/submission/}}"; fi
done
echo "run_autograder: files found in the upload:${{found:- none}}"
nonce="$(od -An -tx1 -N16 /dev/urandom | tr -d ' \\n')"
cd "$ROOT/source"
start=$(date +%s)
printf '%s\\n' "$nonce" | "$PYTHON" -I grader/__main__.py --label "your upload" \\
    --submission "$work" --sandbox --quiet --json "$private/report.json" \\
    --gradescope "$private/results.json" --completion-marker "$private/complete" "$@"
status=$?
echo "run_autograder: the grader exited $status after $(( $(date +%s) - start )) s"
# results/stdout, for the staff: the isolation level, each layer's seconds, grader errors
[ -f "$private/report.json" ] && "$PYTHON" -I gradescope_log.py "$private/report.json" "$@"
rm -rf "$RESULTS"
if [ "$status" -eq 0 ] && [ -f "$private/complete" ] && [ ! -L "$private/results.json" ] \\
   && [ "$(head -n 1 "$private/complete")" = "$nonce" ] \\
   && tail -n +2 "$private/complete" | grep -qF "  $private/results.json" \\
   && tail -n +2 "$private/complete" | sha256sum --check --status; then
    mv -f "$private/results.json" "$RESULTS"
else
    echo "run_autograder: the grader did not complete (exit $status): writing a failed result" >&2
    "$PYTHON" -I gradescope_log.py --failed "$private/report.json" "$status" > "$RESULTS" 2> /dev/null \\
        && [ -s "$RESULTS" ] \\
        || printf '%s\\n' '{{"score": 0, "output": "Grading failed: the autograder did not complete, so this result is not a grade. Please tell the course staff.", "tests": []}}' > "$RESULTS"
fi
rm -rf "$work" "$private"
[ -f "$RESULTS" ] || {{ echo "run_autograder: no results.json was written" >&2; exit 1; }}
"""


def _add(zf: zipfile.ZipFile, name: str, data: bytes, executable: bool = False) -> None:
    info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
    info.external_attr = (0o755 if executable else 0o644) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    zf.writestr(info, data)


def build(out: Path) -> list[str]:
    """Write the zip; the names in it."""
    if not (ROOT / "hidden_tests").is_dir():
        print("gradescope: no hidden_tests/ here: the zip grades the public checks only",
              file=sys.stderr)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    with zipfile.ZipFile(out, "w") as zf:
        _add(zf, "setup.sh", SETUP.encode(), executable=True)
        _add(zf, "run_autograder", RUN.format(exercises=" ".join(EXERCISES)).encode(), executable=True)
        _add(zf, "gradescope_log.py", (f"MIN_MB, MIN_CPUS, SLOW_S = {MIN_MB}, {MIN_CPUS}, {SLOW_S}\n"
                                       + LOG.lstrip()).encode())
        for folder in FOLDERS:
            for path in sorted((ROOT / folder).rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                    _add(zf, path.relative_to(ROOT).as_posix(), path.read_bytes())
        for name in FILES:
            if (ROOT / name).is_file():
                _add(zf, name, (ROOT / name).read_bytes())
        return zf.namelist()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.gradescope", description=__doc__.splitlines()[0])
    p.add_argument("--out", default="dist/autograder.zip", help="the zip to write")
    args = p.parse_args(argv)
    names = build(Path(args.out))
    hidden = sum(n.startswith("hidden_tests/") and "/test_" in n for n in names)
    print(f"gradescope: {args.out} ({len(names)} files, {hidden} hidden check files): upload it as "
          f"the autograder of a programming assignment ('Zip file upload')")
    return 0


if __name__ == "__main__":
    sys.exit(main())
