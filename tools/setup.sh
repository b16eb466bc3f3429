#!/bin/sh
# Pick the Python that runs the lab and write its path to .python.
#  - If the python3 on the PATH already imports everything the lab needs (a GPU box with torch and
#    triton preinstalled, a container), use it and install nothing.
#  - Otherwise create .venv and install requirements.txt into it (first run only: a few minutes).
# Run by make on first use; `make setup` runs it again.
set -e
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
need="import numpy, scipy, pytest, pytest_timeout, rich, matplotlib, torch"
if [ "$(uname -s)" = "Linux" ]; then need="$need, triton"; fi

# Say so when torch or triton differ from the versions requirements.txt pins (the tested pair).
warn_versions() {
    "$1" -c '
import re, sys
here = "%d.%d" % sys.version_info[:2]
pins = {}   # the == pins whose marker (if any) fits this Python
for name, want, low, high in re.findall(r"^(torch|triton)==([\w.]+)(?:.*python_version >= \"([\d.]+)\")?(?:.*python_version < \"([\d.]+)\")?", open("requirements.txt").read(), re.M):
    version = tuple(map(int, here.split(".")))
    if (not low or version >= tuple(map(int, low.split(".")))) and (not high or version < tuple(map(int, high.split(".")))):
        pins[name] = want
for name, want in pins.items():
    try:
        have = __import__(name).__version__
    except Exception:
        continue
    if have.split("+")[0] != want:
        print(f"setup: warning: {name} {have} here, but the lab is tested with {name}=={want} "
              "(requirements.txt); README.md, Versions, gives the supported range", file=sys.stderr)
' || true
}

if [ -z "$FORCE_VENV" ] && "$PYTHON" -c "$need" 2>/dev/null; then
    command -v "$PYTHON" > .python
    warn_versions "$PYTHON"
    echo "setup: using $(cat .python): it already has numpy, torch$( [ "$(uname -s)" = Linux ] && echo ', triton'), pytest, rich" >&2
    exit 0
fi
# 3.10 or newer, and a final release: Ubuntu 22.04's python3.11 package is 3.11.0rc1, whose
# torch._dynamo fails (the solutions scored 94/190 there)
if ! "$PYTHON" -c 'import sys; v = sys.version_info; sys.exit(v < (3, 10) or v.releaselevel != "final")'; then
    echo "setup: the lab needs a released Python 3.10 or newer (not a release candidate); $PYTHON is $("$PYTHON" --version 2>&1)" >&2
    exit 1
fi
if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv and installing requirements.txt (first run only)..." >&2
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt >&2
.venv/bin/python -c "$need" || { echo "setup: the install did not complete; see the messages above" >&2; exit 1; }
echo "$(pwd)/.venv/bin/python" > .python
warn_versions .venv/bin/python
echo "setup: done; the lab runs with .venv/bin/python" >&2
