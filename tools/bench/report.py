"""measure.md: the run's ceilings, the predictions' status and problems, then each benchmark's
own table (its declaration's `table`), in the benchmarks' order. fmt and vs format the cells."""

from __future__ import annotations

from pathlib import Path

from tools.bench.predictions import parse_predictions


def fmt(x, digits=3):
    """A number for a table: 3 significant digits, blank for None."""
    if x is None:
        return ""
    return f"{x:.{digits}g}" if abs(x) < 10 ** digits else f"{x:.0f}"


def vs(measured, predicted):
    """'71.2 (1.1x)': measured, and measured / predicted when both exist."""
    if measured is None:
        return ""
    if predicted:
        return f"{fmt(measured)} ({measured / predicted:.2g}x)"
    return fmt(measured)


def cell(text, width: int = 100) -> str:
    """An error message as one table cell."""
    return (text or "")[:width].replace("|", "/").replace("\n", " ")


def predictions(path) -> dict:
    """{"attn": ..., "softmax": ...} from the predictions file (empty tables when absent)."""
    path = Path(path)
    if not path.exists():
        return {"attn": {}, "softmax": {}, "numpy": {}}
    return parse_predictions(path.read_text(errors="replace"))


def header(ceil: dict, errors, predictions_path) -> list[str]:
    """The title, the ceilings measured, whether predictions were written, the problems."""
    dev = ceil.get("device", {})
    lines = [f"# Measure: {dev.get('name', '?')}", ""]
    if ceil.get("synthetic"):
        lines += ["**SYNTHETIC numbers from `--dry-run` (a counting model of a GB10), not "
                  "measurements.**", ""]
    spec = ceil.get("spec_bandwidth_gbs")
    if ceil.get("host"):
        lines += ["No CUDA GPU on this machine: only the NumPy Measure ran (the lesson's first "
                  "Measure, on a laptop); `make bench` on a GPU adds the Triton and PyTorch rows.",
                  ""]
    else:
        lines += [f"Profile: {ceil.get('profile')}. Ceilings measured in this run: copy "
                  f"**{fmt(ceil.get('copy_gbs'))} GB/s** (2 x bytes / time, a copy reads and "
                  f"writes), fp16 matmul **{fmt(ceil.get('matmul_tflops'))} TFLOP/s** (2 n^3 / "
                  f"time)" + (f"; spec bandwidth {spec:.0f} GB/s." if spec else "."), ""]
    path = Path(predictions_path)
    preds = predictions(path)
    filled = sum(v is not None for d in preds.values() for p in d.values() for v in p.values())
    if not path.exists():
        lines += [f"> No predictions: write them in `{path}` BEFORE you run the benchmark (the "
                  f"lesson: \"write the prediction column before running anything\"), then run "
                  f"`make bench` again.", ""]
    elif filled == 0:
        lines += [f"> `{path}` has no numbers yet: fill in the predicted columns first.", ""]
    else:
        lines += [f"Predictions: `{path}` ({filled} cells). Measured values show "
                  f"(measured / predicted) beside them.", ""]
    lines += [f"> **problem:** {e}" for e in errors] + ([""] if errors else [])
    return lines


def measure_markdown(results: dict, ceil: dict, errors, predictions_path,
                     bhd=(1, 32, 128)) -> str:
    """The whole page: header, then the table of each benchmark in `results` ({name: rows})."""
    from tools.bench.runner import benchmarks

    context = dict(ceil=ceil, bhd=tuple(bhd), preds=predictions(predictions_path))
    lines = header(ceil, errors, predictions_path)
    for bench in benchmarks():
        if bench.name in results and bench.table:
            lines += bench.table(results[bench.name], context)
    return "\n".join(lines)
