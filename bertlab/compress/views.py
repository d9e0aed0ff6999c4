"""What the "Make it smaller" page draws: quality against the share removed (the pruning curves),
and the committed results' tables in the words the page and README use. The page only places them.

Imports plotly, bertlab.figures.answers (the shared look) and bertlab.compress.study; never streamlit.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from bertlab.compress.study import CLAIMS, CurvePoint
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
    """A committed results CSV (study.RECORD_COLUMNS) as the page shows it: one row per copy. Its
    timings were taken beside training runs, so the page shows the benchmark's (`bench_table`)."""
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
                METRIC_NAMES.get(str(r.get("metric")), "quality"): None if quality is None else f"{quality:.1%}",
            }
        )
    return out


def bench_table(rows: Sequence[dict]) -> list[dict]:
    """bench/bench_compression.py's CSV as the page shows it: p50 and the speed-up over fp32 at each
    thread count, and the held-out masked-LM accuracy."""
    out = []
    for r in rows:
        row = {"model": r["model"], "parameters": f"{int(r['parameters']):,}"}
        for t in (1, 2):
            if r.get(f"p50_{t}t_ms") is not None:
                row[f"p50 ms, {t} thread{'s' if t > 1 else ''}"] = r[f"p50_{t}t_ms"]
                row[f"x fp32, {t} thread{'s' if t > 1 else ''}"] = r[f"speedup_p50_{t}t"]
        row["masked-LM accuracy"] = f"{r['mlm_accuracy']:.1%}"
        out.append(row)
    return out


def _by_scheme(rows: Sequence[dict]) -> dict[str, dict]:
    return {str(r["scheme"]): r for r in rows}


def _at(points: Sequence[CurvePoint], method: str, share: float) -> float | None:
    return next((p.quality for p in points if p.method == method and abs(p.share - share) < 1e-6), None)


def claims_rows(
    shipped: Sequence[dict],
    sst2: Sequence[dict],
    shipped_curve: Sequence[CurvePoint],
    sst2_curve: Sequence[CurvePoint],
    distill: Sequence[dict] = (),
) -> list[dict]:
    """The papers' claims (study.CLAIMS) with our committed numbers beside them, where we have them
    (`distill`: results/compression/distill/summary.csv's rows, teacher and student)."""
    ours = {}
    by_model = {str(r.get("model")): r for r in distill}
    teacher, student = by_model.get("teacher"), by_model.get("student")
    if teacher and student and all(r.get(k) for r in (teacher, student) for k in ("parameters", "sst2_dev_mean")):
        ours["distillation"] = (
            f"2-layer student: {1 - student['parameters'] / teacher['parameters']:.0%} fewer parameters, SST-2 "
            f"{student['sst2_dev_mean']:.1%} against {teacher['sst2_dev_mean']:.1%} "
            f"({student['sst2_dev_mean'] / teacher['sst2_dev_mean']:.1%} of the teacher's)"
        )
        if teacher.get("cpu_ms_1t_p50") and student.get("cpu_ms_1t_p50"):
            ours["distillation"] += (
                f", fill-mask {teacher['cpu_ms_1t_p50'] / student['cpu_ms_1t_p50']:.2f}x faster in CPU time at one thread"
            )
    q_lm, q_cls = _by_scheme(shipped).get("int8-dynamic"), _by_scheme(sst2).get("int8-dynamic")
    if q_lm and q_cls:
        ours["int8"] = (
            f"masked LM {q_lm['quality_before']:.1%} → {q_lm['quality_after']:.1%}, {q_lm['weights_mib']} MiB "
            f"({q_lm['vs_fp32']:.2f}x fp32); SST-2 {q_cls['quality_before']:.1%} → {q_cls['quality_after']:.1%}, "
            f"{q_cls['vs_fp32']:.2f}x fp32"
        )
        ours["Q8BERT"] = (
            f"post-training, no QAT: {abs(q_lm['quality_after'] - q_lm['quality_before']) * 100:.1f} and "
            f"{abs(q_cls['quality_after'] - q_cls['quality_before']) * 100:.1f} points off, "
            f"{1 / q_lm['vs_fp32']:.1f}x smaller than fp32 (embeddings stay float)"
        )
    s0, s375, s50 = (_at(sst2_curve, "heads", x) for x in (0.0, 0.375, 0.5))
    m0, m375 = _at(shipped_curve, "heads", 0.0), _at(shipped_curve, "heads", 0.375)
    if None not in (s0, s375, s50, m0, m375):
        ours["Michel"] = (
            f"SST-2 classifier {s0:.1%} → {s375:.1%} with 37.5% of its heads gone, {s50:.1%} with half; "
            f"the masked LM {m0:.1%} → {m375:.1%} at 37.5%"
        )
    rows = []
    for c in CLAIMS:
        key = next((k for k in ("Q8BERT", "Michel") if k in c.source), c.method.split()[0])
        rows.append({"method": c.method, "paper": c.source, "claim": c.claim, "ours": ours.get(key, c.ours)})
    return rows
