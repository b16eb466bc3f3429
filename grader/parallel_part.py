"""One grading process of a parallel grade (grader.parallel), started as

    python -I -B grader/parallel_part.py

by the grade that splits its CPU layers across the cores. The repo root goes after
site-packages, as in grader/__main__.py, so nothing in the current folder shadows an import.
It reads requests on stdin and answers on stdout (grader.parallel says how)."""

import json
import os
import sys


def serve() -> None:
    """Grade each requested exercise with grader.run.grade, under the request's options (the
    grade's own: grader.options); answer on the real stdout, while anything else printed in this
    process goes to stderr."""
    from pathlib import Path

    from grader import options
    from grader.parallel import result_to_dict
    from grader.run import grade

    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    def progress(check, done, total):
        out.write(json.dumps({"progress": check.id}) + "\n")

    for line in sys.stdin:
        req = json.loads(line)
        with options.using(options.Options.from_dict(req["options"])):
            report = grade(Path(req["submission"]), [req["exercise"]], req["layers"],
                           include_hidden=req["include_hidden"], only_checks=req["only_checks"],
                           progress=progress, target=req["target"], kernels=req.get("kernels"),
                           compiled=req.get("compiled"))
        out.write(json.dumps({"results": {r.check.id: result_to_dict(r) for r in report.results},
                              "layer_seconds": report.layer_seconds, "notes": report.notes,
                              "isolation": report.isolation,
                              "seccomp": report.seccomp,
                              "device_info": report.device_info}) + "\n")


if __name__ == "__main__":
    _root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    _cwd = os.getcwd()
    sys.path[:] = [p for p in sys.path if p not in ("", ".", _cwd, _root)] + [_root]
    serve()
