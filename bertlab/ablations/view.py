"""What the Ablations page draws: the paper's table, ours beside it with verdicts, and figures.

Takes the paper's tables (bertlab.ablations.paper) and tidy result rows (bertlab.ablations.results); returns rows (lists
of dicts for st.dataframe), plotly figures and the page's notes. Nothing here runs a job or reads a file.

Imports plotly, bertlab.ablations' paper, results and tables, and bertlab.figures (colours); never streamlit.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from bertlab.ablations.paper import AXIS_TITLES, PAPER, PAPER_COLUMN, short_label
from bertlab.ablations.results import Verdict, main_metric, summarize, verdicts
from bertlab.ablations.tables import TABLES
from bertlab.figures import BLUE, FONT, GREY, ORANGE

GREEN = "#3b8f5a"
RED = "#c0392b"


def paper_rows(table: str) -> list[dict]:
    """The paper's table as printed: one dict per row."""
    t = PAPER[table]
    return [{"variant": label, **dict(zip(t.columns, vals, strict=True))} for _, label, vals in t.rows]


# Left-to-right variants are scored on next-token accuracy (their pretraining task), not masked-token
# accuracy: their pretraining column does not compare with the masked-LM rows.
NEXT_TOKEN_VARIANTS = ("ltr",)


def pretraining_note(table: str) -> str:
    """What the pretraining column of a table's results means."""
    return (
        "The pretraining column is held-out masked-token accuracy (the same 80/10/10 masking for every variant)."
        + TABLES[table].pretraining_note
    )


def variant_labels(table: str) -> dict[str, str]:
    return {key: label for key, label, _ in PAPER[table].rows}


def _fmt(mean: float | None, std: float | None, n: int | None = None) -> str:
    if mean is None:
        return ""
    text = f"{mean:.1f} ± {std:.1f}" if std is not None and n and n > 1 else f"{mean:.1f}"
    return text + (f" (n={n})" if n and n > 1 else "")


def comparison_rows(table: str, rows: Sequence[dict]) -> list[dict]:
    """One row per variant: for each of our task columns, our mean ± std over seeds, the paper's
    number for the matching column (if any) and the verdict."""
    vs = verdicts(table, list(rows))
    cells = {(c.variant, c.task, c.metric): c for c in summarize(list(rows))}
    labels = variant_labels(table)
    by_variant: dict[str, dict] = {}
    columns: dict[str, None] = {"variant": None}
    for v in vs:
        row = by_variant.setdefault(v.variant, {"variant": labels.get(v.variant, v.variant)})
        c = cells.get((v.variant, v.task, v.metric))
        name = f"{v.task} ({v.metric})"
        columns.update(dict.fromkeys((name, f"{name}: paper", f"{name}: verdict")))  # each task's three side by side
        row[name] = _fmt(v.ours, v.ours_std, c.n if c else None)
        if v.paper is not None:
            row[f"{name}: paper"] = v.paper
        if v.text and v.text != "baseline row":
            row[f"{name}: verdict"] = _short_verdict(v)
        if v.task == "pretraining" and v.variant in NEXT_TOKEN_VARIANTS and row[name]:
            row[name] += " (next-token)"
    names = [k for k in columns if any(k in row for row in by_variant.values())]
    return [{k: row.get(k, "—") for k in names} for row in by_variant.values()]  # a cell we have no run for


def _short_verdict(v: Verdict) -> str:
    """A verdict short enough for a table cell: the mark and both differences from the baseline row
    (the whole sentence is in verdict_rows)."""
    if v.agrees is None or v.ours_delta is None or v.paper_delta is None:
        return v.text
    return f"{'✓' if v.agrees else '✗'} ours {v.ours_delta:+.1f}, paper {v.paper_delta:+.1f}"


def agreement(table: str, rows: Sequence[dict]) -> dict:
    """How many (variant, task) directions the paper shows we reproduce: counts and lists."""
    vs = [v for v in verdicts(table, list(rows)) if v.agrees is not None]
    yes = [v for v in vs if v.agrees]
    no = [v for v in vs if not v.agrees]
    return {
        "compared": len(vs),
        "reproduced": len(yes),
        "not_reproduced": len(no),
        "yes": [(v.variant, v.task) for v in yes],
        "no": [(v.variant, v.task) for v in no],
    }


def results_figure(table: str, rows: Sequence[dict], title: str = "") -> go.Figure:
    """One panel per task column: our mean per variant with ± std error bars (seeds), and, where
    the paper has the column, the paper's difference from its baseline added to our baseline (so the
    directions can be compared on one axis)."""
    cells = summarize(list(rows))
    tasks = [t for t in dict.fromkeys(r["task"] for r in rows)]
    labels = {key: short_label(table, key) for key in variant_labels(table)}
    order = [k for k, _, _ in PAPER[table].rows] + sorted({c.variant for c in cells} - set(labels))
    fig = make_subplots(
        rows=1,
        cols=max(1, len(tasks)),
        subplot_titles=[f"{t} ({main_metric(table, t)})" for t in tasks] or [""],
        horizontal_spacing=0.06,
    )
    paper = PAPER[table]
    prow = {k: vals for k, _, vals in paper.rows}
    paper_legend = True
    for i, task in enumerate(tasks, 1):
        metric = main_metric(table, task)
        mine = {c.variant: c for c in cells if c.task == task and c.metric == metric}
        vs = [v for v in order if v in mine]
        fig.add_trace(
            go.Bar(
                x=[labels.get(v, v) for v in vs],
                y=[mine[v].mean for v in vs],
                error_y={"type": "data", "array": [mine[v].std for v in vs], "visible": True, "color": GREY},
                marker_color=[ORANGE if v == paper.baseline else BLUE for v in vs],
                name="ours (mean ± std over seeds; orange: the baseline row)",
                showlegend=i == 1,
                hovertemplate="%{x}<br>%{y:.1f}<extra>ours</extra>",
            ),
            row=1,
            col=i,
        )
        col = PAPER_COLUMN.get(table, {}).get(task)
        base = mine.get(paper.baseline)
        if col in paper.columns and base is not None:
            ci = paper.columns.index(col)
            pb = prow[paper.baseline][ci]
            xs = [labels.get(v, v) for v in vs if v in prow]
            ys = [base.mean + (prow[v][ci] - pb) for v in vs if v in prow]
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=ys,
                    mode="markers",
                    marker={"symbol": "diamond", "size": 10, "color": GREEN},
                    name="paper's difference from its baseline, drawn from ours",
                    showlegend=paper_legend,
                    hovertemplate="%{x}<br>paper-implied %{y:.1f}<extra>paper</extra>",
                ),
                row=1,
                col=i,
            )
            paper_legend = False
        values = [mine[v].mean for v in vs]
        if values:
            lo, hi = min(values), max(values)
            pad = max(1.0, (hi - lo) * 0.6)
            fig.update_yaxes(
                range=[max(0.0, lo - pad) if metric != "mlm_perplexity" else lo - pad, hi + pad], row=1, col=i
            )
    fig.update_xaxes(tickangle=-30, title_text=AXIS_TITLES.get(table))
    fig.update_layout(
        title=title or PAPER[table].title,
        font=FONT,
        height=430,
        bargap=0.3,
        legend={"orientation": "h", "y": -0.45},
        margin={"t": 70, "b": 140, "l": 40, "r": 20},
        plot_bgcolor="white",
    )
    return fig


def verdict_rows(vs: Sequence[Verdict], table: str) -> list[dict]:
    labels = variant_labels(table)
    return [
        {
            "variant": labels.get(v.variant, v.variant),
            "task": v.task,
            "metric": v.metric,
            "ours": None if v.ours is None else round(v.ours, 2),
            "ours vs baseline": None if v.ours_delta is None else round(v.ours_delta, 2),
            "paper vs baseline": v.paper_delta,
            "reproduced": {True: "yes", False: "no"}.get(v.agrees, ""),
            "verdict": v.text,
        }
        for v in vs
        if v.text != "baseline row"
    ]


def agreement_text(table: str, rows: Sequence[dict]) -> str:
    """Where our directions agree with the paper's and where not, in one sentence per side."""
    agree = agreement(table, rows)
    labels = variant_labels(table)

    def listing(pairs: list[tuple[str, str]]) -> str:
        by_variant: dict[str, list[str]] = {}
        for variant, task in pairs:
            by_variant.setdefault(labels.get(variant, variant), []).append(task)
        return "; ".join(f"{v} on {', '.join(ts)}" for v, ts in by_variant.items()) or "none"

    return f"Same direction as the paper: {listing(agree['yes'])}. Not the paper's direction: {listing(agree['no'])}."
