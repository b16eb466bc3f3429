"""The student's predictions, read from <submission>/predictions.md (the lesson's Measure table:
"write the prediction column before running anything").

Tables are recognised by their headers: N / impl / ms / GB (attention) or shape / impl / GB/s
(softmax); a table whose impl cells are naive_attention and tiled_attention is the NumPy Measure
(N / impl / s / peak MB). Cells are read loosely ('~64 ms', '8K', '1,024'); blank, '?' or '-' is
None.
"""

from __future__ import annotations

import re

_NUMBER = re.compile(r"[-+]?(?:\d[\d,]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*([kK]?)")
_SHAPE = re.compile(r"(\d[\d,]*\s*[kK]?)\s*[x×X*]\s*(\d[\d,]*\s*[kK]?)")
_ATTN_ALIASES = {"naive": "naive", "eager": "naive", "sdpa": "sdpa", "mine": "mine",
                 "yours": "mine", "flash": "mine", "flash_fwd": "mine", "triton": "mine"}
_SOFTMAX_ALIASES = {"softmax": "softmax", "softmax (triton)": "softmax", "triton": "softmax",
                    "fused": "softmax", "softmax_eager": "softmax_eager", "eager": "softmax_eager",
                    "torch.softmax": "torch.softmax", "torch": "torch.softmax"}
_NUMPY_IMPLS = ("naive_attention", "tiled_attention")     # tiled_attention.py's functions


def parse_number(cell: str):
    """'64', '~64 ms', '8.6 GB', '1,024', '8K' -> float; blank, '?' or '-' -> None."""
    m = _NUMBER.search(cell or "")
    if not m:
        return None
    value = float(m.group(0).rstrip("kK \t").replace(",", ""))
    return value * 1024 if m.group(1) else value


def _parse_shape(cell: str):
    m = _SHAPE.search(cell or "")
    return (int(parse_number(m.group(1))), int(parse_number(m.group(2)))) if m else None


def _tables(text: str):
    """Markdown tables as (header cells, data rows), lowercased and stripped of backticks."""
    table = []
    for line in text.splitlines() + [""]:
        if line.strip().startswith("|"):
            cells = line.strip().strip("|").split("|")
            table.append([c.strip().strip("`*").strip().lower() for c in cells])
            continue
        if len(table) >= 2:
            rows = [r for r in table[1:] if not all(set(c) <= set("-: ") for c in r)]
            yield table[0], rows
        table = []


def parse_predictions(text: str) -> dict:
    """The student's predictions from predictions.md.

    Returns {"attn": {(N, impl): {"ms": float|None, "peak_gb": float|None}},
             "softmax": {(rows, cols, impl): {"gbs": float|None}},
             "numpy": {(N, impl): {"s": float|None, "peak_mb": float|None}}}. Blank cells are
    None; tables are recognised by their headers (N / impl / ms / GB, or shape / impl / GB/s)
    and, for the NumPy Measure, by its impl names.
    """
    found = {"attn": {}, "softmax": {}, "numpy": {}}
    for header, rows in _tables(text):
        col = {name: i for i, name in enumerate(header)}
        impl_i = next((i for i, h in enumerate(header) if "impl" in h), None)
        gbs_i = next((i for i, h in enumerate(header) if "gb/s" in h), None)
        if impl_i is None:
            continue
        for r in rows:
            r = r + [""] * (len(header) - len(r))
            impl = r[impl_i]
            if gbs_i is not None:
                shape_i = next((i for i, h in enumerate(header) if "shape" in h or "rows" in h), 0)
                shape = _parse_shape(r[shape_i])
                name = _SOFTMAX_ALIASES.get(impl)
                if shape and name:
                    found["softmax"][(*shape, name)] = {"gbs": parse_number(r[gbs_i])}
                continue
            if impl in _NUMPY_IMPLS:
                n = parse_number(r[col.get("n", 0)])
                s_i = next((i for i, h in enumerate(header) if re.search(r"\bs\b", h)), None)
                mb_i = next((i for i, h in enumerate(header) if re.search(r"\bmb\b", h)), None)
                if n:
                    found["numpy"][(int(n), impl)] = {
                        "s": parse_number(r[s_i]) if s_i is not None else None,
                        "peak_mb": parse_number(r[mb_i]) if mb_i is not None else None}
                continue
            ms_i = next((i for i, h in enumerate(header) if re.search(r"\bms\b", h)), None)
            gb_i = next((i for i, h in enumerate(header) if re.search(r"\bgb\b", h)), None)
            n = parse_number(r[col.get("n", 0)])
            name = _ATTN_ALIASES.get(impl)
            if n and name:
                found["attn"][(int(n), name)] = {
                    "ms": parse_number(r[ms_i]) if ms_i is not None else None,
                    "peak_gb": parse_number(r[gb_i]) if gb_i is not None else None}
    return found
