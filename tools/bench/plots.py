"""The PNGs a benchmark declares (spec.Plot), drawn the same way for all: matplotlib's Agg
backend (no display needed), "no measurements" on an empty plot, N ticks as 512, 1K, ... 16K."""

from __future__ import annotations

from pathlib import Path


def n_ticks(ax, ns) -> None:
    if ns:
        ax.set_xticks(ns, [f"{n // 1024}K" if n >= 1024 else str(n) for n in ns])
        ax.minorticks_off()


def ceiling_line(ax, value, label: str, ls: str = "--", scale: float = 1.0) -> None:
    """A horizontal line at a ceiling measured in this run (when there is one)."""
    if value:
        ax.axhline(scale * value, color="gray", ls=ls, label=label.format(value))


def render(out: Path, bench, rows: list, context: dict) -> list[Path]:
    """Every plot of `bench` from its rows; the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    for plot in bench.plots:
        panels = plot.panels or ((None, lambda r: True),)
        fig, axes = plt.subplots(1, len(panels), figsize=(6.4 if len(panels) == 1 else 11, 4.4),
                                 sharey=True, squeeze=False)
        for ax, (title, keep) in zip(axes[0], panels):
            drawn = plot.draw(ax, [r for r in rows if keep(r)], context)
            if not drawn:
                ax.text(0.5, 0.5, "no measurements", ha="center", va="center",
                        transform=ax.transAxes)
            _dress(ax, plot, rows, title)
        axes[0][0].set_ylabel(plot.ylabel)
        text = plot.title(rows, context)
        fig.suptitle(text, fontsize=10) if plot.panels else axes[0][0].set_title(text, fontsize=10)
        fig.tight_layout()
        fig.savefig(out / plot.name, dpi=110)
        plt.close(fig)
        paths.append(out / plot.name)
    return paths


def _dress(ax, plot, rows, title) -> None:
    if title:
        ax.set_title(title, fontsize=10)
    ax.set_xlabel(plot.xlabel)
    if plot.n_ticks:
        n_ticks(ax, sorted({r["N"] for r in rows}))
    if plot.from_zero:
        ax.set_ylim(bottom=0)
    ax.grid(True, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8)
