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

if [ -z "$FORCE_VENV" ] && "$PYTHON" -c "$need" 2>/dev/null; then
    command -v "$PYTHON" > .python
    echo "setup: using $(cat .python): it already has numpy, torch$( [ "$(uname -s)" = Linux ] && echo ', triton'), pytest, rich" >&2
    exit 0
fi
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
    echo "setup: the lab needs Python 3.10 or newer; $PYTHON is $("$PYTHON" --version 2>&1)" >&2
    exit 1
fi
if [ ! -x .venv/bin/python ]; then
    echo "setup: creating .venv and installing requirements.txt (first run only)..." >&2
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt >&2
.venv/bin/python -c "$need" || { echo "setup: the install did not complete; see the messages above" >&2; exit 1; }
echo "$(pwd)/.venv/bin/python" > .python
echo "setup: done; the lab runs with .venv/bin/python" >&2
