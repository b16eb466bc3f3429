"""python -m tools.stubs: write each student stub exercises/<ex>.py from solutions/<ex>.py.

The solution file is the one source (as otter-grader's `# BEGIN SOLUTION` markers make it): a
signature, a docstring or a given function is written once, and the stub is made from it. In a
solution, four marker lines, each a whole line at any indentation, mark what differs:

    # BEGIN SOLUTION        the answer: the stub leaves these lines out
    ...
    # END SOLUTION
    # BEGIN STUB            the stub's text for this place (its TODO comments with "roughly N
    # # TODO(ex): ...       lines", its `raise NotImplementedError("TODO(ex): ...")`, the lesson's
    # raise ...             skeleton): each line is written as a comment, the marker's indentation
    # END STUB              then "# " (a bare "#" for an empty line), and the stub gets it back
                            without that prefix

Every other line is the same in both files. A STUB block usually follows the SOLUTION block it
replaces; one may stand alone (text only the stub has, such as a hint for students), and a
SOLUTION block with no STUB after it is code the stub simply leaves out. A marker is a comment
of its own, never a line inside a string: where a docstring differs, the whole docstring goes in
the blocks, so both files keep clean docstrings. Blocks do not nest; a marker that is unbalanced,
nested, misspelt (`# BEGIN SOLUTIONS`) or inside a string, a STUB line without its "#" prefix, or a
solution with no SOLUTION block at all fails with file:line (exit 2).

The known mistakes and the corpora (tests/exercises/*/mutants.py, tests/*/*/<ex>.edits.json)
edit the solution as it runs (`solution_of`: the SOLUTION blocks without the markers and the STUB
blocks), by `find` texts that must occur there once: markers and stub text never get in their way,
so nothing is written twice for them (tests/test_stubs.py checks every edit applies).

It never writes over work. A stub is written only where exercises/<ex>.py is missing or holds,
byte for byte, a stub written here before (RECORD keeps the SHA-256 of every stub it writes; git
ignores it and the release leaves it out). Any other file (a filled-in exercise, in the course's
checkout after `make setup` or a copy that lost the timestamps the Makefile goes by) is kept,
with one line saying so; --force NAME replaces it.

    python -m tools.stubs                  write exercises/*.py (make stubs), keeping work
    python -m tools.stubs --force [NAME..] write these stubs (all without a name) over anything
    python -m tools.stubs --check          exit 1 naming every stub that differs from what it
                                           would write
"""

from __future__ import annotations

import argparse
import hashlib
import io
import re
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOLUTIONS = ROOT / "solutions"
EXERCISES = ROOT / "exercises"
RECORD = ROOT / ".stubs-written"   # "<sha256> <file name>" for every stub ever written here

KINDS = ("SOLUTION", "STUB")
MARKER = re.compile(r"^(?P<indent>[ \t]*)# (?P<edge>BEGIN|END) (?P<kind>SOLUTION|STUB)$")
# a line that looks like a marker but is not exactly one: an error rather than common text,
# so that a typo cannot leak a solution block into the stub
LOOKALIKE = re.compile(r"^\s*#+\s*(BEGIN|END)\s*(SOLUTION|STUB)", re.IGNORECASE)


class MarkerError(ValueError):
    """A solution's markers cannot be read; the message starts with file:line."""


def stub_of(source: str, name: str = "<solution>") -> str:
    """The stub that the marked solution `source` makes (`name` is for error messages)."""
    return _made(source, name, "STUB")


def solution_of(source: str, name: str = "<solution>") -> str:
    """The marked solution `source` as it runs: its SOLUTION blocks, without the marker lines
    and the STUB blocks (what a mistake or a variant of the corpus edits: tests.cases)."""
    return _made(source, name, "SOLUTION")


def _made(source: str, name: str, side: str) -> str:
    """The file `side` ("STUB" or "SOLUTION") that the marked solution `source` makes."""
    out: list[str] = []
    block = None             # (kind, indent, line number of its BEGIN) while inside a block
    blocks = 0
    for number, line in enumerate(source.splitlines(keepends=True), start=1):
        text = line.rstrip("\r\n")
        marker = MARKER.match(text)
        where = f"{name}:{number}"
        if marker is None and LOOKALIKE.match(text):
            raise MarkerError(f"{where}: not a marker: {text.strip()!r} (the markers are "
                              + ", ".join(f"'# {e} {k}'" for k in KINDS for e in ("BEGIN", "END"))
                              + ", each alone on its line)")
        if marker is not None:
            edge, kind, indent = marker["edge"], marker["kind"], marker["indent"]
            if edge == "BEGIN":
                if block is not None:
                    raise MarkerError(f"{where}: '# BEGIN {kind}' inside the {block[0]} block "
                                      f"opened at line {block[2]}: blocks do not nest")
                block = (kind, indent, number)
                blocks += kind == "SOLUTION"
            elif block is None or block[0] != kind:
                opened = "no block is open" if block is None else \
                    f"the open block is {block[0]}, from line {block[2]}"
                raise MarkerError(f"{where}: '# END {kind}' without '# BEGIN {kind}' ({opened})")
            else:
                block = None
            continue
        if block is None:
            out.append(line)
        elif block[0] == "STUB":
            stub_line = _uncomment(line, block[1], where)
            if side == "STUB":
                out.append(stub_line)
        else:
            if side == "SOLUTION":
                out.append(line)
    if block is not None:
        raise MarkerError(f"{name}:{block[2]}: '# BEGIN {block[0]}' is never closed "
                          f"(no '# END {block[0]}' after it)")
    if not blocks:
        raise MarkerError(f"{name}:1: no '# BEGIN SOLUTION' block: the stub would hold the "
                          "whole solution")
    _markers_outside_strings(source, name)
    return "".join(out)


def _markers_outside_strings(source: str, name: str) -> None:
    """A marker line inside a multi-line string would be read as one, yet be part of the
    string (and a STUB line's quotes could end it): refuse it."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError) as e:
        raise MarkerError(f"{name}: cannot be read as Python ({e}); the markers must be "
                          "comments of a file that runs") from None
    lines = source.splitlines()
    for tok in tokens:
        if tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
            for number in range(tok.start[0] + 1, tok.end[0] + 1):
                if LOOKALIKE.match(lines[number - 1]):
                    raise MarkerError(f"{name}:{number}: a marker inside the string that starts "
                                      f"at line {tok.start[0]}: put the whole string in the blocks")


def _uncomment(line: str, indent: str, where: str) -> str:
    """A STUB block's line with its comment prefix taken off: `indent# text` -> `indent text`."""
    body = line.rstrip("\r\n")
    end = line[len(body):]
    if body == indent + "#":
        return end                                   # an empty line of the stub
    if not body.startswith(indent + "# "):
        raise MarkerError(f"{where}: a line of a STUB block must start with the marker's "
                          f"indentation and '# ' (or be a bare '#'): {body.strip()!r}")
    return indent + body[len(indent) + 2:] + end


def expected_stubs(solutions: Path = SOLUTIONS) -> dict[str, str]:
    """{file name: stub text} for every solutions/*.py."""
    return {path.name: stub_of(path.read_text(), _shown(path))
            for path in sorted(solutions.glob("*.py"))}


def differing(stubs: dict[str, str], exercises: Path = EXERCISES) -> list[str]:
    """The stub files (names) in `exercises` that are not what the solutions make, missing ones
    included, and any stub with no solution behind it."""
    wrong = [name for name, text in stubs.items()
             if not (exercises / name).is_file() or (exercises / name).read_text() != text]
    orphans = [p.name for p in sorted(exercises.glob("*.py")) if p.name not in stubs]
    return sorted(wrong + orphans)


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def written_before(record: Path | None = None) -> set[str]:
    """The SHA-256 of every stub this checkout's generator has written (or found in place)."""
    record = RECORD if record is None else record
    if not record.is_file():
        return set()
    return {line.split()[0] for line in record.read_text().splitlines() if line.strip()}


def _remember(entries: list[str], record: Path) -> None:
    with record.open("a") as f:
        f.writelines(f"{entry}\n" for entry in entries)


def write(stubs: dict[str, str], exercises: Path, force: set[str] | None = None,
          record: Path | None = None) -> tuple[list[str], list[str]]:
    """Write each stub where its file is missing, is a stub written here before, or is named in
    `force` (every one when `force` is empty but not None); (written, kept) file names. A kept
    file differs from every stub written here: someone's work, left as it is."""
    record = RECORD if record is None else record
    generated = written_before(record)
    written, kept, new = [], [], []
    for name, text in stubs.items():
        target, stub = exercises / name, text.encode()
        current = target.read_bytes() if target.is_file() else None
        ours = (current is None or current == stub
                or hashlib.sha256(current).hexdigest() in generated)
        if not ours and not (force == set() or (force and name.removesuffix(".py") in force)):
            kept.append(name)
            continue
        if current != stub:
            target.write_bytes(stub)
            written.append(name)
        if _sha(text) not in generated:   # written now, or found as made: a stub of ours
            generated.add(_sha(text))
            new.append(f"{_sha(text)} {name}")
    if new:
        _remember(new, record)
    return written, kept


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.stubs", description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true",
                   help="write nothing; exit 1 naming every stub that differs from its solution")
    p.add_argument("--force", nargs="*", metavar="NAME",
                   help="write these exercises' stubs (every one without a name) over whatever "
                        "their files hold")
    args = p.parse_args(argv)
    try:
        stubs = expected_stubs(SOLUTIONS)
    except MarkerError as e:
        print(f"tools.stubs: {e}", file=sys.stderr)
        return 2
    if args.check:
        stale = differing(stubs, EXERCISES)
        for name in stale:
            why = (f"differs from what solutions/{name} makes (make stubs writes it, or keeps "
                   f"it if it is not a stub written here: --force {name.removesuffix('.py')})"
                   if name in stubs
                   else f"has no solutions/{name} to be made from")
            print(f"{_shown(EXERCISES / name)}: {why}", file=sys.stderr)
        return 1 if stale else 0
    force = None if args.force is None else {n.removesuffix(".py") for n in args.force}
    unknown = sorted((force or set()) - {n.removesuffix(".py") for n in stubs})
    if unknown:
        print(f"tools.stubs: no solutions/{unknown[0]}.py to make a stub from "
              f"(exercises: {', '.join(n.removesuffix('.py') for n in stubs)})", file=sys.stderr)
        return 2
    written, kept = write(stubs, EXERCISES, force)
    for name in written:
        print(f"wrote {_shown(EXERCISES / name)}")
    for name in kept:
        print(f"kept {_shown(EXERCISES / name)}: it differs from every stub written here (your "
              f"work?); `python -m tools.stubs --force {name.removesuffix('.py')}` replaces it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
