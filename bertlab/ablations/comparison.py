"""Our ablation results against the paper's: means over seeds (`summarize`), the metric each column is
compared on (`main_metric`), verdicts on the direction of each difference from the baseline row
(`verdicts`), Table 6's size trend (`size_trend`, `size_breaks`), and which rows are still on the
masked-LM plateau, where a comparison says little (`still_on_plateau`).

Takes the tidy rows of bertlab.ablations.results. Torch-free: imports bertlab.ablations' paper, results
(the order a table shows its rows) and tables, and bertlab.finetune.tasks (each task's metrics).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from bertlab.ablations.paper import PAPER, PAPER_COLUMN, encoder_weights, our_label
from bertlab.ablations.results import in_table_order
from bertlab.ablations.tables import TABLES
from bertlab.finetune.tasks import get_task


@dataclass(frozen=True)
class Cell:
    """Our mean +- std over seeds for one variant, task column and metric."""

    variant: str
    task: str
    metric: str
    mean: float
    std: float
    n: int


def summarize(rows: list[dict]) -> list[Cell]:
    groups: dict[tuple[str, str, str], list[float]] = {}
    for r in rows:
        groups.setdefault((r["variant"], r["task"], r["metric"]), []).append(float(r["value"]))
    return [
        Cell(v, t, m, statistics.fmean(xs), statistics.stdev(xs) if len(xs) > 1 else 0.0, len(xs))
        for (v, t, m), xs in groups.items()
    ]


def main_metric(table: str, task: str) -> str:
    """The metric a column is compared on: the paper's for its column, else the task's official one."""
    paper = PAPER[table]
    col = PAPER_COLUMN.get(table, {}).get(task)
    if task == "pretraining":
        return paper.metrics[paper.columns.index(col)] if col in paper.columns else "mlm_acc"
    spec = get_task(task.removesuffix("-feature"))
    if col in paper.columns and paper.metrics[paper.columns.index(col)] in spec.metrics:
        return paper.metrics[paper.columns.index(col)]
    return spec.main_metric  # a task that stands in for the paper's column (UPOS for NER) keeps its own metric


def left_to_right(table: str, grid: tuple = ()) -> set[str]:
    """The table's rows whose pretraining is left-to-right: their held-out score is next-word accuracy."""
    spec = TABLES.get(table)
    if spec is None or not spec.pretrains:
        return set()
    return {v.key for v in spec.variants(grid) if "data.objective=ltr" in (v.pretrain or ())}


def compared_with_baseline(table: str, task: str, variant: str) -> bool:
    """Whether a row's cell is read as a difference from the baseline row's: not a left-to-right row's
    pretraining score, which is next-token accuracy, another task than the masked-LM rows'."""
    return not (task == "pretraining" and variant in left_to_right(table))


NO_CLEAR = "no clear difference"  # a difference within its noise (the larger std over seeds)


@dataclass(frozen=True)
class Verdict:
    """One variant on one column: the paper's difference from its baseline row, and ours."""

    variant: str
    task: str
    metric: str
    ours: float | None
    ours_std: float | None
    ours_delta: float | None  # variant - baseline, our means
    paper: float | None
    paper_delta: float | None
    agrees: bool | None  # same sign of the difference (None: no paper column, or the baseline row)
    text: str
    clear: bool | None = None  # our difference is beyond its noise (None: no difference computed)


def verdicts(table: str, rows: list[dict]) -> list[Verdict]:
    """Per variant and task column: does our difference from the baseline row go the paper's way?

    A difference smaller than both its noise (the baseline's and the variant's std over seeds) and
    0.5 points in the paper is 'no clear difference', which agrees with a paper difference under 0.5.
    A shape grid (Table 6), whose rows are our own, is read against the paper's size trend instead
    (`_shape_verdicts`)."""
    if table in TABLES and TABLES[table].shape_grid:
        return _shape_verdicts(table, rows)
    paper = PAPER[table]
    cells = {(c.variant, c.task, c.metric): c for c in summarize(rows)}
    tasks = list(dict.fromkeys(r["task"] for r in rows))
    variants_ = list(dict.fromkeys([k for k, _, _ in paper.rows] + [r["variant"] for r in rows]))
    paper_rows = {k: vals for k, _, vals in paper.rows}
    out = []
    for task in tasks:
        metric = main_metric(table, task)
        col = PAPER_COLUMN.get(table, {}).get(task)
        ci = paper.columns.index(col) if col in paper.columns else None
        base = cells.get((paper.baseline, task, metric))
        for v in variants_:
            c = cells.get((v, task, metric))
            if c is None:
                continue
            p = paper_rows.get(v, (None,) * len(paper.columns))[ci] if ci is not None else None
            pb = paper_rows.get(paper.baseline, (None,) * len(paper.columns))[ci] if ci is not None else None
            p_delta = None if p is None or pb is None else round(p - pb, 2)
            o_delta, agrees, text, ours_flat = None, None, "", False
            if v == paper.baseline:
                text = "baseline row"
            elif base is None:
                text = "no baseline row in our results"
            elif not compared_with_baseline(table, task, v):
                text = "next-token accuracy, another task: not compared"
            else:
                o_delta, noise, how = _difference(c, base, metric)
                ours_flat = how == NO_CLEAR
                if p_delta is None:
                    text = f"ours {o_delta:+.1f}" + (" (within the noise)" if ours_flat else "")
                else:
                    paper_flat = abs(p_delta) < 0.5
                    if ours_flat or paper_flat:
                        agrees = ours_flat and paper_flat
                    else:
                        agrees = math.copysign(1, o_delta) == math.copysign(1, p_delta)
                    text = f"paper {p_delta:+.1f}, ours {o_delta:+.1f}{_spread(c, base, noise)}: {how}" + (
                        "; direction reproduced" if agrees else "; direction not reproduced"
                    )
            clear = None if o_delta is None else not ours_flat
            out.append(Verdict(v, task, metric, c.mean, c.std, o_delta, p, p_delta, agrees, text, clear))
    return out


def _spread(c: Cell, base: Cell, noise: float) -> str:
    """How a verdict writes the noise of a difference: ± the larger std over seeds, or that both rows are
    one run each (no spread is measured, so any difference counts as clear)."""
    return " (one run each)" if c.n == 1 and base.n == 1 else f" ± {noise:.1f}"


def _difference(c: Cell, base: Cell, metric: str) -> tuple[float, float, str]:
    """Our row's difference from the baseline row, its noise (the larger std over seeds), and what it
    says: 'no clear difference' (within the noise), else 'better' or 'worse' (perplexity: lower is better)."""
    delta = c.mean - base.mean
    noise = max(c.std, base.std)
    better = (delta < 0) if metric == "mlm_perplexity" else (delta > 0)
    return delta, noise, NO_CLEAR if abs(delta) <= noise else ("better" if better else "worse")


def _shape_verdicts(table: str, rows: list[dict]) -> list[Verdict]:
    """Table 6: each shape against our smallest (the baseline row, first in table order), read against
    the paper's finding that bigger is better: a bigger shape reproduces it when it is clearly better
    (beyond its noise); the paper's difference shown is from its smallest model to its largest. A shape
    of the baseline's size (other heads) is not judged: the paper has no size trend for it."""
    paper = PAPER[table]
    cells = {(c.variant, c.task, c.metric): c for c in summarize(rows)}
    shapes = list(dict.fromkeys(r["variant"] for r in in_table_order(table, rows)))
    out: list[Verdict] = []
    for task in dict.fromkeys(r["task"] for r in rows):
        metric = main_metric(table, task)
        col = PAPER_COLUMN.get(table, {}).get(task)
        ci = paper.columns.index(col) if col in paper.columns else None
        trend = None if ci is None else round(paper.rows[-1][2][ci] - paper.rows[0][2][ci], 2)
        base = cells.get((shapes[0], task, metric))
        for v in shapes:
            c = cells.get((v, task, metric))
            if c is None:
                continue
            if v == shapes[0] or base is None:
                text = "baseline row" if v == shapes[0] else "no baseline row in our results"
                out.append(Verdict(v, task, metric, c.mean, c.std, None, None, None, None, text))
                continue
            o_delta, noise, how = _difference(c, base, metric)
            ours = f"ours {o_delta:+.1f}{_spread(c, base, noise)}: {how}"
            if (encoder_weights(v) or 0) <= (encoder_weights(shapes[0]) or 0) or trend is None:
                text = ours + ("; the baseline's size, not judged" if trend is not None else "")
                out.append(Verdict(v, task, metric, c.mean, c.std, o_delta, None, None, None, text))
                continue
            agrees = how == "better"
            text = f"bigger: the paper {trend:+.1f} from its smallest model to its largest, {ours}; " + (
                "direction reproduced" if agrees else "direction not reproduced"
            )
            out.append(Verdict(v, task, metric, c.mean, c.std, o_delta, None, trend, agrees, text, how != NO_CLEAR))
    return out


def _size_columns(rows: list[dict]) -> dict[str, tuple[str, list[tuple[int, Cell]]]]:
    """Table 6's columns as "task (metric)" -> (the metric compared: held-out perplexity for pretraining,
    the task's main metric otherwise; each shape's cell with its encoder weights, smallest first)."""
    cells = summarize(rows)
    out = {}
    for task in dict.fromkeys(c.task for c in cells):
        metric = main_metric("table6", task) if task != "pretraining" else "mlm_perplexity"
        pts = [(p, c) for c in cells if c.task == task and c.metric == metric and (p := encoder_weights(c.variant))]
        out[f"{task} ({metric})"] = (metric, sorted(pts, key=lambda pc: pc[0]))
    return out


def size_trend(rows: list[dict]) -> dict[str, float]:
    """Table 6: Spearman's rank correlation between parameter count and each column's score."""
    return {
        col: _spearman([p for p, _ in pts], [c.mean for _, c in pts])
        for col, (_, pts) in _size_columns(rows).items()
        if len(pts) >= 3
    }


@dataclass(frozen=True)
class SizeBreak:
    """Where a column stops improving with size: a shape clearly worse (beyond both stds over seeds)
    than the best strictly smaller one."""

    column: str  # "task (metric)", as size_trend names it
    variant: str
    value: float
    smaller: str
    smaller_value: float


def size_breaks(rows: list[dict]) -> dict[str, list[SizeBreak]]:
    """Table 6: per column (held-out perplexity and each task's compared metric), every shape clearly
    worse than the best shape of fewer encoder weights; an empty list says the column gets better (or
    stays level) with every step in size. Shapes of one size (other heads) are not held against each
    other; a single run (perplexity) has no spread, so any rise counts."""
    out: dict[str, list[SizeBreak]] = {}
    for col, (metric, pts) in _size_columns(rows).items():
        lower = metric == "mlm_perplexity"
        breaks = []
        for p, c in pts:
            smaller = [d for q, d in pts if q < p]
            if not smaller:
                continue
            best = (min if lower else max)(smaller, key=lambda d: d.mean)
            delta = c.mean - best.mean
            if (delta > 0 if lower else delta < 0) and abs(delta) > max(c.std, best.std):
                breaks.append(SizeBreak(col, c.variant, c.mean, best.variant, best.mean))
        if len(pts) >= 2:
            out[col] = breaks
    return out


def _spearman(x: list[float], y: list[float]) -> float:
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        for rank, i in enumerate(order):
            r[i] = float(rank)
        return r

    rx, ry = ranks(x), ranks(y)
    mx, my = statistics.fmean(rx), statistics.fmean(ry)
    num = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    den = math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))
    return round(num / den, 3) if den else 0.0


PLATEAU_EXIT = 20.0  # held-out masked-token accuracy (%) a masked-LM variant must pass to have left the plateau
GUESS_EXIT = 8.0  # held-out accuracy (%) past which a row has left the unigram guess (~5%), though not the plateau


def still_on_plateau(rows: list[dict], meta: dict) -> dict[str, float]:
    """variant -> its held-out masked-token accuracy (%, mean over runs) where a masked-LM variant is
    under PLATEAU_EXIT: a model that has learned little beyond word frequencies, whose comparisons
    say little about the paper's. Left-to-right variants score next-token prediction and are not
    judged; neither is a table that pretrains nothing."""
    spec = meta.get("spec") or {}
    table = TABLES.get(str(spec.get("table") or meta.get("table") or (rows[0]["table"] if rows else "")))
    if table is None or not table.pretrains:
        return {}
    ltr = left_to_right(table.key, tuple(tuple(g) for g in spec.get("grid") or ()))
    scores: dict[str, list[float]] = {}
    for r in rows:
        if r["task"] == "pretraining" and r["metric"] == "mlm_acc" and r["variant"] not in ltr:
            scores.setdefault(r["variant"], []).append(float(r["value"]))
    means = {v: sum(x) / len(x) for v, x in scores.items()}
    return {v: round(m, 1) for v, m in means.items() if m < PLATEAU_EXIT}


def plateau_text(table: str, plateau: dict[str, float]) -> str:
    """In words: which rows are still on the plateau, and what it means for reading them."""
    listed = "; ".join(f"{our_label(table, v)}: {acc:.1f}%" for v, acc in plateau.items())
    if min(plateau.values()) >= GUESS_EXIT:
        meaning = (
            "These have learned some context (guessing each word by how common it is scores about 5%), but less "
            "than a model past the line, so their comparisons are weaker evidence about what the paper found."
        )
    else:
        meaning = (
            "These models have learned little beyond how common each word is, so their comparisons say little "
            "about what the paper found."
        )
    return (
        f"Still on the masked-LM plateau (held-out masked-token accuracy under {PLATEAU_EXIT:.0f}%): {listed}. "
        f"{meaning} Pretrain longer: the shipped mini model passed 20% after about 21M tokens."
    )
