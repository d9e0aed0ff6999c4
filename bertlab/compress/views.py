"""What the "Make it smaller" page draws: quality against the share removed (the pruning curves),
and the committed results' tables in the words the page and README use. The page only places them.

Imports plotly, bertlab.figures.answers (the shared look) and bertlab.compress.study; never streamlit.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from bertlab.compress.study import CurvePoint
from bertlab.figures.answers import style_figure

METHOD_NAMES = {"heads": "heads removed (least important first)", "sparsity": "weights zeroed (magnitude)"}
METRIC_NAMES = {"mlm_accuracy": "held-out masked-LM accuracy", "dev_accuracy": "dev accuracy"}
COLOURS = {"heads": "#d62728", "sparsity": "#1f77b4"}


def curve_figure(points: Sequence[CurvePoint], title: str = "") -> go.Figure:
    """Quality against the share removed, one line per method (heads, magnitude)."""
    fig = go.Figure()
    for method in ("heads", "sparsity"):
        mine = [p for p in points if p.method == method]
        if mine:
            fig.add_scatter(
                x=[p.share for p in mine],
                y=[p.quality for p in mine],
                mode="lines+markers",
                name=METHOD_NAMES[method],
                line=dict(color=COLOURS[method]),
                hovertemplate="%{x:.0%} removed: %{y:.1%}<extra></extra>",
            )
    metric = METRIC_NAMES.get(points[0].metric, points[0].metric) if points else "quality"
    fig.update_xaxes(title="share removed", tickformat=".0%", range=[-0.02, 0.92])
    fig.update_yaxes(title=metric, tickformat=".0%", rangemode="tozero")
    return style_figure(fig, title, height=360, legend=dict(orientation="h", y=-0.3))


def results_table(rows: Sequence[dict]) -> list[dict]:
    """A committed results CSV (study.RECORD_COLUMNS) as the page shows it: one row per copy."""
    out = []
    for r in rows:
        quality = r.get("quality_after")
        out.append(
            {
                "copy": r["method"] if r["method"] == "source" else f"{r['method']} ({r['scheme']})",
                "parameters": f"{int(r['parameters']):,}",
                "MiB": r["weights_mib"],
                "x fp32": r["vs_fp32"],
                "x source": r["vs_source"],
                "p50 ms (1 thread)": r.get("p50_1t_ms"),
                "speed-up (1 thread)": r.get("speedup_1t"),
                METRIC_NAMES.get(str(r.get("metric")), "quality"): None if quality is None else f"{quality:.1%}",
            }
        )
    return out
