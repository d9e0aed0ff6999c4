"""What the Ablations page draws: the paper's table, ours beside it with verdicts, and figures.

Takes the paper's tables (bertlab.ablations.paper) and tidy result rows (bertlab.ablations.results), compared
with them by bertlab.ablations.comparison; returns rows (lists of dicts for st.dataframe or st.table), plotly
figures and the page's notes. Nothing here runs a job or reads a file.

Imports plotly, bertlab.ablations' paper, comparison and tables, and bertlab.figures.answers (colours); never streamlit.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from bertlab.ablations.comparison import (
    PLATEAU_EXIT,
    Verdict,
    compared_with_baseline,
    left_to_right,
    main_metric,
    size_breaks,
    size_trend,
    summarize,
    verdicts,
)
from bertlab.ablations.paper import AXIS_TITLES, PAPER, PAPER_COLUMN, our_label, short_label, variant_label
from bertlab.ablations.tables import TABLES
from bertlab.figures.answers import BLUE, FONT, GREY

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
    what = (
        "held-out masked-LM perplexity, lower is better (masked-token accuracy is in the pretraining curves below)"
        if main_metric(table, "pretraining") == "mlm_perplexity"
        else "held-out masked-token accuracy"
    )
    return (
        f"The pretraining column is {what}, with the same 80/10/10 masking for every variant."
        + TABLES[table].pretraining_note
    )


def variant_labels(table: str) -> dict[str, str]:
    return {key: label for key, label, _ in PAPER[table].rows}


def _fmt(mean: float | None, std: float | None, n: int | None = None) -> str:
    if mean is None:
        return ""
    text = f"{mean:.1f} ± {std:.1f}" if std is not None and n and n > 1 else f"{mean:.1f}"
    return text + (f" (n={n})" if n and n > 1 else "")


def comparison_by_task(table: str, rows: Sequence[dict], what: Mapping[str, str] | None = None) -> list[dict]:
    """Our results beside the paper's, a row per (task, variant) labelled as ours (`our_label`): our
    mean ± std over seeds, the paper's number (a column only when the paper has one for some task) and
    the short verdict. Five columns, so that the page can show every cell whole: a row per variant
    needs three columns a task (19 for Table 5) and cannot fit a page."""
    vs = verdicts(table, list(rows))
    cells = {(c.variant, c.task, c.metric): c for c in summarize(list(rows))}
    what = what or {}
    with_paper = any(v.paper is not None for v in vs)
    task_order = {t: n for n, t in enumerate(dict.fromkeys(v.task for v in vs))}
    out = []
    for v in sorted(vs, key=lambda v: task_order[v.task]):  # grouped by task, each in table order (a stable sort)
        c = cells.get((v.variant, v.task, v.metric))
        ours = _fmt(v.ours, v.ours_std, c.n if c else None) or "—"
        if v.task == "pretraining" and v.variant in NEXT_TOKEN_VARIANTS and v.ours is not None:
            ours += " (next-token)"
        row = {
            "task": f"{v.task} ({v.metric})",  # as the wide form's columns; the caption says which way is better
            "variant": our_label(table, v.variant, what.get(v.variant, "")),
            "ours": ours,
        }
        if with_paper:
            row["paper"] = "—" if v.paper is None else str(v.paper)  # as printed: 91.0, 5.84
        row["verdict"] = _short_verdict(v)  # the baseline's: 'baseline row'
        out.append(row)
    return out


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
    # misses of a kind of their own: we find a clear difference where the paper's is under half a point,
    # which its single run cannot tell from none (Table 6's verdicts are against a size trend: none here)
    flat = [v for v in no if v.paper is not None and v.paper_delta is not None and abs(v.paper_delta) < 0.5]
    # and misses where ours is within its noise while the paper's is clear: too small to tell here, not opposite
    unclear = [v for v in no if v not in flat and v.clear is False]
    return {
        "compared": len(vs),
        "reproduced": len(yes),
        "not_reproduced": len(no),
        "yes": [(v.variant, v.task) for v in yes],
        "no": [(v.variant, v.task) for v in no if v not in flat and v not in unclear],
        "ours_unclear": [(v.variant, v.task) for v in unclear],
        "paper_flat": [(v.variant, v.task) for v in flat],
        "paper_flat_same_sign": sum(1 for v in flat if (v.ours_delta or 0) * (v.paper_delta or 0) > 0),
    }


def _add_paper_differences(
    fig: go.Figure, table: str, task: str, variants: Sequence[tuple[str, str]], legend: dict, panel: int
) -> list[float]:
    """Green diamonds in panel `panel`: the paper's difference of each (variant, label) from its
    baseline in the paper's column for `task`; returns those differences (none without a column)."""
    paper = PAPER[table]
    col = PAPER_COLUMN.get(table, {}).get(task)
    if col not in paper.columns:
        return []
    ci = paper.columns.index(col)
    prow = {k: vals for k, _, vals in paper.rows}
    pb = prow[paper.baseline][ci]
    pts = [(label, prow[v][ci] - pb) for v, label in variants if v in prow and prow[v][ci] is not None]
    fig.add_trace(
        go.Scatter(
            x=[x for x, _ in pts],
            y=[d for _, d in pts],
            mode="markers",
            marker={"symbol": "diamond", "size": 11, "color": GREEN},
            name="the paper: variant − its baseline",
            showlegend=legend["paper"],
            hovertemplate="%{x}<br>%{y:+.1f} points<extra>paper</extra>",
        ),
        row=1,
        col=panel,
    )
    legend["paper"] = False
    return [d for _, d in pts]


def results_figure(table: str, rows: Sequence[dict], title: str = "") -> go.Figure:
    """One panel per task column: each variant's difference from the baseline row (our means), drawn
    from a zero line, with error bars of the difference's noise over seeds (sqrt(std_variant² +
    std_baseline²)), and the paper's difference from its baseline beside it (green diamonds). Every
    task panel shares one axis spanning at least ±3 points, so that a 1-point difference does not look
    like a cliff and tasks compare at a glance; the pretraining panel keeps its own (another quantity, whose
    gaps, e.g. Table 8's 22 points, would flatten every task's)."""
    cells = summarize(list(rows))
    tasks = [t for t in dict.fromkeys(r["task"] for r in rows)]
    paper = PAPER[table]
    labels = {key: short_label(table, key) for key in variant_labels(table)}
    present = list(dict.fromkeys(r["variant"] for r in rows))
    # the paper's baseline row; a table whose rows are our own (Table 6's grid): our first row, the smallest shape
    baseline = paper.baseline if paper.baseline in present or not present else present[0]
    order = [k for k, _, _ in paper.rows if k != baseline] + [v for v in present if v not in labels and v != baseline]
    fig = make_subplots(
        rows=1,
        cols=max(1, len(tasks)),
        subplot_titles=[_panel_title(table, t) for t in tasks] or [""],
        horizontal_spacing=0.07,
    )
    legend = {"ours": True, "paper": True}
    reaches: dict[int, float] = {}  # panel -> the largest |difference| + noise it must show
    own_scale: dict[int, bool] = {}
    for i, task in enumerate(tasks, 1):
        metric = main_metric(table, task)
        mine = {c.variant: c for c in cells if c.task == task and c.metric == metric}
        base = mine.get(baseline)
        vs = [v for v in order if v in mine and compared_with_baseline(table, task, v)]
        if base is None or not vs:
            continue
        deltas = [mine[v].mean - base.mean for v in vs]
        noise = [math.hypot(mine[v].std, base.std) for v in vs]
        fig.add_trace(
            go.Bar(
                x=[labels.get(v, v) for v in vs],
                y=deltas,
                error_y={"type": "data", "array": noise, "visible": True, "color": GREY},
                marker_color=BLUE,
                name="ours: variant − baseline (± noise over seeds)",
                showlegend=legend["ours"],
                hovertemplate="%{x}<br>%{y:+.1f} points<extra>ours</extra>",
            ),
            row=1,
            col=i,
        )
        legend["ours"] = False
        paper_deltas = []
        if baseline == paper.baseline:
            paper_deltas = _add_paper_differences(fig, table, task, [(v, labels.get(v, v)) for v in vs], legend, i)
        reaches[i] = max([abs(d) + n for d, n in zip(deltas, noise, strict=True)] + [abs(d) for d in paper_deltas])
        own_scale[i] = task == "pretraining"
    # one scale for every task panel (pretraining keeps its own), so that tasks compare at a glance
    shared = max([3.0] + [r for i, r in reaches.items() if not own_scale[i]])
    for i, r in reaches.items():
        reach = max(3.0, r) if own_scale[i] else shared
        fig.update_yaxes(
            range=[-1.1 * reach, 1.1 * reach], zeroline=True, zerolinewidth=2, zerolinecolor=GREY, row=1, col=i
        )
    fig.update_yaxes(title_text="difference from the baseline row", row=1, col=1)  # the title names it
    fig.update_xaxes(tickangle=-30, title_text=AXIS_TITLES.get(table))
    fig.update_layout(
        title=title or f"{paper.title}: each row's difference from {our_label(table, baseline)}",
        font=FONT,
        height=450,
        bargap=0.35,
        legend={"orientation": "h", "y": -0.5},
        margin={"t": 100, "b": 150, "l": 60, "r": 20},
        plot_bgcolor="white",
    )
    fig.update_annotations(font_size=13)  # the panel titles (two lines each)
    return fig


def curves_figure(table: str, curves: Mapping[str, Sequence[dict]], grid: tuple = ()) -> go.Figure:
    """Each row's pretraining as it went: held-out masked-token accuracy (next-word accuracy for a
    left-to-right row, dotted) against the tokens seen, with the line a masked-LM row must pass to have
    left the plateau, so a reader can check that a comparison is between models that learned."""
    ltr = left_to_right(table, grid)
    fig = go.Figure()
    reach = PLATEAU_EXIT
    for variant, points in curves.items():
        label = our_label(table, variant) + (" (next-word accuracy)" if variant in ltr else "")
        ys = [p["mlm_acc"] for p in points]
        reach = max([reach, *ys])
        fig.add_trace(
            go.Scatter(
                x=[p["tokens"] / 1e6 for p in points],
                y=ys,
                mode="lines+markers",
                name=label,
                line={"dash": "dot" if variant in ltr else "solid"},
                hovertemplate=f"{label}<br>%{{x:.1f}}M tokens: %{{y:.1f}}%<extra></extra>",
            )
        )
    fig.add_hline(
        y=PLATEAU_EXIT,
        line={"dash": "dash", "color": GREY},
        annotation_text=f"{PLATEAU_EXIT:.0f}%: left the plateau",
        # top left: every curve starts under the line, so the words sit on no data (at the bottom right
        # they lay across the curves that end near 20%)
        annotation_position="top left",
    )
    fig.update_layout(
        title=f"{PAPER[table].title}: each row's pretraining, held-out accuracy as it learned",
        xaxis_title="tokens seen (millions)",
        yaxis={"title": "held-out accuracy (%)", "range": [0, 1.1 * reach], "ticksuffix": "%"},
        font=FONT,
        height=420,
        legend={"orientation": "h", "y": -0.25},
        margin={"t": 60, "b": 110, "l": 60, "r": 20},
        plot_bgcolor="white",
    )
    fig.update_xaxes(showgrid=True, gridcolor="#eee")
    fig.update_yaxes(showgrid=True, gridcolor="#eee")
    return fig


# a panel's title as a reader says it (the tables keep the keys, which the CSV and the CLI use)
_TASK_NAMES = {"pretraining": "Pretraining", "upos": "UPOS", "ner": "NER", "sst2": "SST-2", "mrpc": "MRPC"}
_TASK_NAMES |= {"qnli": "QNLI", "rte": "RTE", "squad": "SQuAD", "cola": "CoLA", "stsb": "STS-B", "mnli": "MNLI"}
_METRIC_NAMES = {
    "mlm_acc": "masked-token accuracy",
    "mlm_perplexity": "perplexity, lower is better",
    "exact_match": "exact match",
    "f1": "F1",
}


def _panel_title(table: str, task: str) -> str:
    metric = main_metric(table, task)
    name = _TASK_NAMES.get(task.removesuffix("-feature"), task.removesuffix("-feature"))
    frozen = ", frozen features" if task.endswith("-feature") else ""
    # the metric on a line of its own: six panels a row leave ~120 px a title, where "pretraining
    # (masked-token accuracy)" ran into its neighbour's
    return f"{name}{frozen}<br>({_METRIC_NAMES.get(metric, metric.replace('_', ' '))})"


def verdict_rows(vs: Sequence[Verdict], table: str, what: Mapping[str, str] | None = None) -> list[dict]:
    """Every verdict but the baseline rows', with its whole sentence: one row per variant and task."""
    what = what or {}
    return [
        {
            "variant": our_label(table, v.variant, what.get(v.variant, "")),
            "task": v.task,
            "metric": v.metric,
            # text, with a dash for none: a missing number in a table reads "None"
            "ours": "—" if v.ours is None else f"{v.ours:.2f}",
            "ours vs baseline": "—" if v.ours_delta is None else f"{v.ours_delta:+.2f}",
            "paper vs baseline": "—" if v.paper_delta is None else f"{round(v.paper_delta, 2):+}",
            "reproduced": {True: "yes", False: "no"}.get(v.agrees, ""),
            "verdict": v.text,
        }
        for v in vs
        if v.text != "baseline row"
    ]


def agreement_text(table: str, rows: Sequence[dict]) -> str:
    """Where our directions agree with the paper's and where not, in one sentence per side."""
    agree = agreement(table, rows)

    def listing(pairs: list[tuple[str, str]]) -> str:
        by_variant: dict[str, list[str]] = {}
        for variant, task in pairs:
            by_variant.setdefault(our_label(table, variant), []).append(task)
        return "; ".join(f"{v} on {', '.join(ts)}" for v, ts in by_variant.items()) or "none"

    text = f"Same direction as the paper: {listing(agree['yes'])}."
    if agree["no"]:
        text += f" Against the paper's direction (a clear difference the other way): {listing(agree['no'])}."
    if agree["ours_unclear"]:
        text += (
            f" Not reproduced, too small to tell here: {listing(agree['ours_unclear'])}, where the paper's difference "
            "is clear and ours is within our seeds' spread."
        )
    if flat := agree["paper_flat"]:
        text += (
            f" Not reproduced either, though of another kind: {listing(flat)}, where we find a clear difference "
            "(beyond the seeds' spread) and the paper's is under half a point, which its one run per row cannot "
            "tell from none; "
            + (
                ("it has the paper's sign." if agree["paper_flat_same_sign"] else "its sign is the paper's opposite.")
                if len(flat) == 1
                else f"{agree['paper_flat_same_sign']} of these {len(flat)} "
                + ("has" if agree["paper_flat_same_sign"] == 1 else "have")
                + " the paper's sign."
            )
        )
    return text


def size_order_text(table: str, rows: Sequence[dict]) -> str:
    """Table 6 in words: does each column get better with every step in size, and where not, which
    shape is clearly worse than a smaller one; with each column's rank correlation with size."""
    breaks, trend = size_breaks(list(rows)), size_trend(list(rows))
    parts = []
    for col, found in breaks.items():
        task, _, metric = col.rstrip(")").partition(" (")
        name = (
            "Held-out perplexity"
            if task == "pretraining"
            else f"{PAPER_COLUMN.get(table, {}).get(task, task)} {metric}"
        )
        rho = f" (rank correlation with size {trend[col]:+.2f})" if col in trend else ""
        if not found:
            parts.append(f"{name}: better or level at every step in size{rho}")
            continue
        worse = "; ".join(
            f"{variant_label(table, b.variant)} ({b.value:.1f}) is worse than the smaller "
            f"{variant_label(table, b.smaller)} ({b.smaller_value:.1f})"
            for b in found
        )
        parts.append(f"{name}: not monotone{rho}: {worse}")
    return ". ".join(parts) + "." if parts else ""


def column_widths(rows: Sequence[dict], most: int = 420) -> dict[str, int]:
    """Pixels each column of a table needs to show its name and its longest cell whole (up to
    `most`; a wider table scrolls sideways): a header is never cut off."""
    names = list(dict.fromkeys(k for r in rows for k in r))
    return {k: min(most, 24 + round(7.5 * max([len(str(k))] + [len(str(r.get(k, ""))) for r in rows]))) for k in names}
