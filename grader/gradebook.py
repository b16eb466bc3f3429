"""The files a batch keeps beside its reports, and what --again and --merge read back from them.

    gradebook.csv     one row per submission (`columns`), rewritten whole after each submission
                      (write_gradebook), so a batch stopped half way keeps the rows it finished
    selection.json    what the batch graded besides the submissions (`selection`): --again goes
                      on only with the same

--again keeps the rows that stand (rows_that_stand, stands) and grades the others; --merge
joins the gradebooks of a job array's shards (merge). grader.batch grades the submissions.
"""

from __future__ import annotations

import csv
import json
import os
import sys
from pathlib import Path


def columns(exercises: list[str]) -> list[str]:
    return ["submission", *exercises, "total", "max", "note", "undecided"]


def score_cell(x: float) -> str:
    """A score as the gradebook writes it (and --again compares it with a report's)."""
    return f"{round(x, 3):g}"


def write_gradebook(path: Path, header: list[str], rows: list[dict]) -> None:
    """The rows sorted by submission, written whole or not at all (a temporary file of this
    process's, then os.replace): a reader never sees half a gradebook. (Its mode is the umask's,
    as a file the batch writes directly.)"""
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f".{path.name}.{os.getpid()}.part")
    with open(part, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=header, lineterminator="\n")
        writer.writeheader()
        writer.writerows(sorted(rows, key=lambda r: r["submission"]))
    os.replace(part, path)


def selection(args, exercises: list[str]) -> dict:
    """What a batch graded besides the submissions: --again goes on only with the same."""
    return {"exercises": exercises, "layers": args.layers, "hidden": not args.no_hidden,
            "sandbox": args.sandbox}


def write_selection(out: Path, chosen: dict) -> None:
    (out / "selection.json").write_text(json.dumps(chosen, indent=1) + "\n")


def rows_that_stand(book: Path, header: list[str], out: Path, chosen: dict, everyone: set[str],
                    subs: list[Path]) -> tuple[dict[str, dict], dict[str, dict]] | str:
    """--again: (the rows of `book` for `subs` that stand, the rows of the other submissions
    named in `everyone`, outside --shard, carried as they were), by submission; or why the batch
    in `out` cannot go on with this selection. A row stands when it is whole, graded (no note),
    with every perf check decided, and its report is in out/reports, says the same total and
    maximum, and is newer than every file of its submission."""
    if not book.is_file():
        return {}, {}
    earlier = out / "selection.json"
    if earlier.is_file() and json.loads(earlier.read_text()) != chosen:
        return (f"{out} was graded with {earlier.read_text().strip()}, not {json.dumps(chosen)}: "
                f"give the same --exercises, --layers, --no-hidden and --sandbox, or another --out")
    with open(book, newline="") as f:
        reader = csv.DictReader(f)
        if reader.fieldnames != header:
            return (f"{book} has columns {reader.fieldnames}, this batch {header}: give the "
                    f"--exercises it was graded with, or another --out")
        old = {row["submission"]: row for row in reader}
    mine = {sub.name: sub for sub in subs}
    others = {name: row for name, row in old.items() if name in everyone and name not in mine}
    kept = {name: row for name, row in old.items()
            if name in mine and stands(row, out / "reports" / f"{name}.json", mine[name])}
    return kept, others


def stands(row: dict, report: Path, sub: Path) -> bool:
    """Whether --again keeps this gradebook row of `sub` (rows_that_stand)."""
    if None in row or None in row.values() or row["note"] or row["undecided"]:
        return False   # a line cut short or too long, a failed grade, an undecided perf check
    try:
        graded = json.loads(report.read_text())
        newest = max((p.stat().st_mtime for p in sub.rglob("*") if p.is_file()), default=0.0)
        return (report.stat().st_mtime >= newest and score_cell(graded["score"]) == row["total"]
                and score_cell(graded["max_score"]) == row["max"])
    except (OSError, ValueError, KeyError, TypeError):
        return False


def merge(paths: list[str], out: Path) -> int:
    """Join gradebooks (the shards of a job array) into one; the same columns everywhere."""
    header, rows, seen = None, [], {}
    for path in paths:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            if header is None:
                header = reader.fieldnames
            elif reader.fieldnames != header:
                print(f"grader batch: {path} has columns {reader.fieldnames}, {paths[0]} has "
                      f"{header}: grade every shard with the same --exercises", file=sys.stderr)
                return 2
            for row in reader:
                if row["submission"] in seen:
                    print(f"grader batch: {row['submission']} is in both {seen[row['submission']]} "
                          f"and {path}", file=sys.stderr)
                    return 2
                seen[row["submission"]] = path
                rows.append(row)
    write_gradebook(out, header, rows)
    print(f"gradebook: {out} ({len(rows)} submissions from {len(paths)} files)")
    return 0
