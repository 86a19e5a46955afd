"""The cohort report's charts: score histograms drawn with matplotlib as SVG files, at build time.

Figures are made with matplotlib's object API (no pyplot, no global state, no GUI backend). Text stays
text in the SVG (fonttype none), and the files carry no date, so the same gradebook gives the same files.
Only assignment names (the grader's) appear in a chart, never a student's text.
"""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib
from matplotlib.figure import Figure

from autograder.report.text import points

BINS = 10
SVG_SETTINGS = {"svg.fonttype": "none", "svg.hashsalt": "cohort-report", "font.size": 9}


def histogram(scores: list[float], maximum: float, title: str, path: Path) -> None:
    """A histogram of `scores` over [0, maximum] in BINS equal bins, each bar labelled with its count,
    the mean marked."""
    with matplotlib.rc_context(SVG_SETTINGS):
        figure = Figure(figsize=(5.2, 2.4))
        figure.subplots_adjust(left=0.11, right=0.98, bottom=0.2, top=0.88)  # fixed: a layout engine is slow
        axes = figure.add_subplot()
        top = maximum if maximum > 0 else 1.0
        counts, _, bars = axes.hist(scores, bins=BINS, range=(0, top), color="#4a78a8", edgecolor="white")
        axes.bar_label(bars, labels=[str(int(c)) if c else "" for c in counts], fontsize=8)
        if scores:
            mean = sum(scores) / len(scores)
            axes.axvline(mean, color="#c0504d", linestyle="--", linewidth=1)
            axes.annotate(f"mean {points(round(mean, 2))}", (mean, 1), xycoords=("data", "axes fraction"),
                          xytext=(3, -10), textcoords="offset points", color="#c0504d", fontsize=8)
        axes.set_title(title, loc="left", fontsize=10)
        axes.set_xlabel(f"points (of {points(maximum)})")
        axes.set_ylabel("submissions")
        axes.set_xlim(0, top)
        axes.set_ylim(0, max(counts.max() if len(counts) else 0, 1) * 1.2)
        axes.yaxis.get_major_locator().set_params(integer=True)
        axes.spines[["top", "right"]].set_visible(False)
        figure.savefig(path, format="svg", metadata={"Date": None})


def write_charts(folder: Path, assignments: list[dict], totals: list[float]) -> dict[str, str]:
    """One histogram per assignment and one of the totals, into `folder`; {name: file name}, the
    totals under ""."""
    folder.mkdir(parents=True, exist_ok=True)
    charts = {}
    for index, row in enumerate(assignments):
        name = f"scores-{index}-{re.sub(r'[^A-Za-z0-9_-]+', '_', row['name'])[:40]}.svg"
        histogram(row["scores"], row["max_score"], row["name"], folder / name)
        charts[row["name"]] = name
    if totals:
        maximum = max(sum(a["max_score"] for a in assignments), max(totals))
        histogram(totals, maximum, "total", folder / "scores-total.svg")
        charts[""] = "scores-total.svg"
    return charts
