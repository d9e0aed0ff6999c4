"""The successors suite's comparison: each row's fine-tuning scores against BERT's row, and a verdict per
paper claim (bertlab.ablations.successors.CLAIMS) from what the suite measured.

Owns: `COLUMNS` (the task columns and the metric each is read on), `Score` with `task_scores` and
`average_scores` (mean ± std over seeds; an average over tasks is taken per seed first, so its spread
is the seeds'), `finetune_rows` (the page's and README's table), `ClaimVerdict` with `claim_verdicts`
(agrees / no clear difference / disagrees / not tested: the run failed / not measured yet, each with the
numbers and the reason), and `in_short` (one sentence per verdict for the page's first paragraph).

A difference counts as clear when it is larger than its noise, the larger of the two rows' std over
seeds, as the ablation tables read theirs (bertlab.ablations.comparison). With one seed of either row
the noise is unmeasured, so a claim that reads that difference stays 'not measured yet'. Accuracy on a held-out set of
n instances is near chance when it lies within its 99% binomial interval around 50% (2.58 standard errors).

Torch-free: imports bertlab.ablations.successors (the claims and rows), successors_record (the pretraining
record: parameters and the sentence-pair heads scored both ways) and bertlab.ablations.tables.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bertlab.ablations.successors import BASELINE, CLAIMS, PaperClaim
from bertlab.ablations.successors_record import SuccessorsRecord
from bertlab.ablations.tables import SUCCESSOR_ROWS

# (task, metric, title): MRPC on accuracy, as Table 5 reads it: every pair called a paraphrase already
# scores F1 81 on its dev set, so F1 hides whether a weak model learned anything
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("sst2", "accuracy", "SST-2 (acc.)"),
    ("mrpc", "accuracy", "MRPC (acc.)"),
    ("qnli", "accuracy", "QNLI (acc.)"),
    ("rte", "accuracy", "RTE (acc.)"),
    ("squad", "f1", "SQuAD (F1)"),
)
GLUE_TASKS = ("sst2", "mrpc", "qnli", "rte")  # the GLUE tasks the suite runs (an average over them: "GLUE-4")
ALL_TASKS = tuple(t for t, _, _ in COLUMNS)
METRIC = {t: m for t, m, _ in COLUMNS}
LABELS = dict(SUCCESSOR_ROWS)

AGREES, NO_CLEAR, DISAGREES, NOT_YET = "agrees", "no clear difference", "disagrees", "not measured yet"
UNTESTED = "not tested: the run failed"  # measured, but on a pretraining run that did not learn its objective


@dataclass(frozen=True)
class Score:
    """A mean over seeds with its std (0 for one seed) and the number of seeds."""

    mean: float
    std: float
    n: int

    def text(self) -> str:
        return f"{self.mean:.1f} ± {self.std:.1f}" if self.n > 1 else f"{self.mean:.1f} (one seed)"


def _score(values: Sequence[float]) -> Score:
    return Score(statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0, len(values))


def _per_seed(rows: Sequence[dict]) -> dict[tuple[str, str], dict[int, float]]:
    """(variant, task) -> {seed: value} on each task's column metric."""
    out: dict[tuple[str, str], dict[int, float]] = {}
    for r in rows:
        if METRIC.get(r["task"]) == r["metric"]:
            out.setdefault((r["variant"], r["task"]), {})[int(r["seed"])] = float(r["value"])
    return out


def task_scores(rows: Sequence[dict]) -> dict[tuple[str, str], Score]:
    """(variant, task) -> its score over seeds, from tidy results rows (bertlab.ablations.results)."""
    return {k: _score(list(v.values())) for k, v in _per_seed(rows).items()}


def average_scores(rows: Sequence[dict], tasks: Sequence[str]) -> dict[str, Score]:
    """variant -> its average over `tasks`, taken per seed (a seed counts when it ran every task), then
    mean ± std over those seeds. Rows that miss a task have no average."""
    per = _per_seed(rows)
    out = {}
    for variant in dict.fromkeys(v for v, _ in per):
        seeds = set.intersection(*(set(per.get((variant, t), {})) for t in tasks))
        if seeds:
            out[variant] = _score([statistics.fmean(per[(variant, t)][s] for t in tasks) for s in sorted(seeds)])
    return out


def finetune_rows(rows: Sequence[dict]) -> list[dict]:
    """The comparison table: a row per variant (the suite's order), each task's mean ± std with its
    difference from BERT's row, the GLUE-4 and five-task averages. Empty cells: not run yet."""
    scores = task_scores(rows)
    glue, five = average_scores(rows, GLUE_TASKS), average_scores(rows, ALL_TASKS)
    present = {v for v, _ in scores}
    out = []
    for key, label in SUCCESSOR_ROWS:
        if key not in present:
            continue
        row: dict[str, str] = {"row": label}
        for task, _metric, title in COLUMNS:
            row[title] = _cell(scores.get((key, task)), scores.get((BASELINE, task)), key)
        row["GLUE-4 average"] = _cell(glue.get(key), glue.get(BASELINE), key)
        row["5-task average"] = _cell(five.get(key), five.get(BASELINE), key)
        out.append(row)
    return out


def _cell(score: Score | None, base: Score | None, variant: str) -> str:
    """'75.0 ± 0.8 (−2.0)': mean ± std over seeds and the difference from BERT's row; '75.0 (−2.0; one seed)'."""
    if score is None:
        return "—"
    spread = f"{score.mean:.1f} ± {score.std:.1f}" if score.n > 1 else f"{score.mean:.1f}"
    notes = [] if variant == BASELINE or base is None else [f"{score.mean - base.mean:+.1f}".replace("-", "−")]
    notes += [] if score.n > 1 else ["one seed"]
    return spread + (f" ({'; '.join(notes)})" if notes else "")


@dataclass(frozen=True)
class Difference:
    """One row against BERT's on one score: the difference of the means and its noise."""

    ours: Score
    base: Score
    delta: float
    noise: float  # the larger std over seeds

    @property
    def spread_known(self) -> bool:
        """Both rows ran two seeds or more: one seed's std is 0 because it is unmeasured, not because it is small."""
        return self.ours.n > 1 and self.base.n > 1

    @property
    def clear(self) -> bool:
        return self.spread_known and abs(self.delta) > self.noise

    @property
    def direction(self) -> int:
        """+1 clearly better, -1 clearly worse, 0 within the noise."""
        return 0 if not self.clear else (1 if self.delta > 0 else -1)

    def text(self, what: str) -> str:
        noise = f" ± {self.noise:.1f}" if self.spread_known else "; one seed"
        return f"{what} {self.ours.mean:.1f} vs {self.base.mean:.1f} ({self.delta:+.1f}{noise})"


def difference(score: Score | None, base: Score | None) -> Difference | None:
    if score is None or base is None:
        return None
    return Difference(score, base, score.mean - base.mean, max(score.std, base.std))


@dataclass(frozen=True)
class ClaimVerdict:
    """A paper claim read against the suite: what the paper printed, what we measured, the verdict and why."""

    claim: PaperClaim
    verdict: str  # AGREES | NO_CLEAR | DISAGREES | NOT_YET
    ours: str  # our numbers in words
    why: str  # how the verdict follows from them, or what is missing

    def row(self) -> dict:
        return {
            "claim": f"{LABELS.get(self.claim.variant, self.claim.variant)}: {self.claim.what}",
            "paper": self.claim.numbers_text() or "a direction (see the claim)",
            "ours": self.ours or "—",
            "verdict": self.verdict,
            "why": self.why,
        }


def _one_seed(c: PaperClaim, ours: str, *diffs: Difference) -> ClaimVerdict | None:
    """NOT_YET while a difference the verdict reads has one seed on either row (no spread to compare it with)."""
    short = [d for d in diffs if not d.spread_known]
    if not short:
        return None
    rows = sorted({LABELS.get(v, v) for d in short for v, s in ((c.variant, d.ours), (BASELINE, d.base)) if s.n < 2})
    why = f"one seed so far of {' and '.join(rows)}: a difference is told from noise with two seeds or more of both"
    return ClaimVerdict(c, NOT_YET, ours, why)


CHANCE_Z = 2.576  # a 99% interval: the held-out pair sets hold a few hundred pairs, so 95% would call 54% "solved"


def near_chance(accuracy: float, n: int) -> bool:
    """Within the 99% binomial interval of a coin's 50% on `n` instances (accuracy in %)."""
    return abs(accuracy - 50.0) <= CHANCE_Z * 100 * math.sqrt(0.25 / max(n, 1))


def claim_verdicts(
    rows: Sequence[dict],
    parameters: Mapping[str, int] | None = None,
    pair_accuracy: Mapping[tuple[str, str], tuple[float, int]] | None = None,
    discriminator_auc: float | None = None,
) -> list[ClaimVerdict]:
    """A verdict per claim of CLAIMS, in its order.

    Args:
        rows: tidy fine-tuning results of the successors suite (values in %, as collected).
        parameters: variant -> parameters of the model that fine-tunes (the pretraining record).
        pair_accuracy: (variant, "nsp" | "sop") -> (accuracy in %, instances): a row's sentence-pair head
            scored on held-out NSP and SOP instances, for the ALBERT paper's both-ways test.
        discriminator_auc: the ELECTRA row's held-out AUC of P(replaced); below LEARNED_AUC its verdict says
            that the row tests a discriminator that did not learn, not the objective.
    """
    make = {
        "electra_small": _electra,
        "albert_size": _albert_size,
        "albert_sop": _albert_sop,
        "roberta_no_nsp": _roberta,
        "span_squad": _span,
    }
    context = _Context(task_scores(rows), rows, dict(parameters or {}), dict(pair_accuracy or {}))
    out = [make[c.key](c, context) for c in CLAIMS if c.key in make]
    if discriminator_auc is not None and discriminator_auc < LEARNED_AUC:
        failed = (
            f"our ELECTRA discriminator did not learn (held-out AUC {discriminator_auc:.2f}; 0.5 is no signal), "
            "so this row tests a failed run at mini size and 32M tokens, not replaced-token detection itself"
        )
        out = [_failed_run(v, failed) if v.claim.variant == "electra" else v for v in out]
    return out


def _failed_run(v: ClaimVerdict, failed: str) -> ClaimVerdict:
    """A measured verdict on a run that did not learn becomes UNTESTED, keeping what was measured in its why."""
    if v.verdict == NOT_YET:
        return dataclasses.replace(v, why=f"{v.why}; {failed}")
    return dataclasses.replace(v, verdict=UNTESTED, why=f"{failed}. As measured: {v.why}")


LEARNED_AUC = 0.55  # a discriminator whose held-out AUC is below this has learned (next to) nothing


def record_inputs(record: SuccessorsRecord) -> tuple[dict[str, int], dict[tuple[str, str], tuple[float, int]]]:
    """`claim_verdicts`' parameters and pair accuracies (in %) from the committed pretraining record."""
    parameters = {r.variant: r.parameters for r in record.rows if r.parameters}
    pair = {}
    for r in record.rows:
        for task, acc, n in (("nsp", r.nsp_acc, r.nsp_instances), ("sop", r.sop_acc, r.sop_instances)):
            if acc is not None and n:
                pair[(r.variant, task)] = (100 * acc, n)
    return parameters, pair


@dataclass(frozen=True)
class _Context:
    scores: dict[tuple[str, str], Score]
    rows: Sequence[dict]
    parameters: dict[str, int]
    pair: dict[tuple[str, str], tuple[float, int]]

    def diff(self, variant: str, task: str) -> Difference | None:
        return difference(self.scores.get((variant, task)), self.scores.get((BASELINE, task)))

    def average_diff(self, variant: str, tasks: Sequence[str]) -> Difference | None:
        averages = average_scores(self.rows, tasks)
        return difference(averages.get(variant), averages.get(BASELINE))

    def missing(self, variant: str, tasks: Sequence[str]) -> str:
        gone = [t for t in tasks for v in (variant, BASELINE) if (v, t) not in self.scores]
        rows = sorted({v for t in tasks for v in (variant, BASELINE) if (v, t) not in self.scores})
        return f"needs {' and '.join(LABELS.get(v, v) for v in rows)} on {', '.join(dict.fromkeys(gone))}"


def _by_direction(d: Difference, expected: int) -> str:
    """The verdict for a paper that found the row better (+1) or worse (-1) than BERT."""
    return NO_CLEAR if d.direction == 0 else (AGREES if d.direction == expected else DISAGREES)


def _electra(c: PaperClaim, ctx: _Context) -> ClaimVerdict:
    d = ctx.average_diff("electra", GLUE_TASKS)
    if d is None:
        return ClaimVerdict(c, NOT_YET, "", ctx.missing("electra", GLUE_TASKS))
    if early := _one_seed(c, d.text("GLUE-4 average"), d):
        return early
    verdict = _by_direction(d, +1)
    why = {
        AGREES: "ELECTRA's row is clearly above BERT's on the average of our four GLUE tasks, as the paper found",
        NO_CLEAR: "the two rows' GLUE-4 averages are within their spread over seeds",
        DISAGREES: "ELECTRA's row is clearly below BERT's on the GLUE-4 average",
    }[verdict]
    return ClaimVerdict(c, verdict, d.text("GLUE-4 average"), why + " (the paper: +4.8 GLUE at equal compute)")


def _albert_size(c: PaperClaim, ctx: _Context) -> ClaimVerdict:
    d = ctx.average_diff("albert", ALL_TASKS)
    p_albert, p_bert = ctx.parameters.get("albert"), ctx.parameters.get(BASELINE)
    sizes = f"{p_albert / 1e6:.2f}M vs {p_bert / 1e6:.2f}M parameters" if p_albert and p_bert else ""
    if d is None or not sizes:
        missing = ctx.missing("albert", ALL_TASKS) if d is None else "needs both rows' parameter counts"
        return ClaimVerdict(c, NOT_YET, sizes, missing)
    ours = f"{sizes} ({p_bert / p_albert:.1f}x fewer); {d.text('5-task average')}"
    if p_albert >= p_bert:
        return ClaimVerdict(c, DISAGREES, ours, "our ALBERT row is not smaller than BERT's")
    if early := _one_seed(c, ours, d):
        return early
    verdict = AGREES if d.direction <= 0 else DISAGREES  # fewer parameters for a loss, or for no clear one
    why = {
        -1: "fewer parameters and a clear loss on average, as the paper found (its loss: 2.2 points)",
        0: "fewer parameters for no clear loss on average: the paper's trade, with the loss within our spread",
        1: "fewer parameters and clearly *better* on average: the paper found a loss",
    }[d.direction]
    return ClaimVerdict(c, verdict, ours, why)


def _albert_sop(c: PaperClaim, ctx: _Context) -> ClaimVerdict:
    sop_on_nsp, nsp_on_sop = ctx.pair.get(("albert", "nsp")), ctx.pair.get((BASELINE, "sop"))
    if sop_on_nsp is None or nsp_on_sop is None:
        return ClaimVerdict(
            c, NOT_YET, "", "needs ALBERT's sentence-order head scored on NSP and BERT's NSP head on SOP"
        )
    (a, na), (b, nb) = sop_on_nsp, nsp_on_sop
    ours = f"SOP-trained (ALBERT) on NSP {a:.1f}%; NSP-trained (BERT) on SOP {b:.1f}% ({na:,} and {nb:,} pairs)"
    sop_solves_nsp, nsp_fails_sop = not near_chance(a, na) and a > 50, near_chance(b, nb)
    if sop_solves_nsp and nsp_fails_sop:
        return ClaimVerdict(
            c, AGREES, ours, "the sentence-order head solves NSP above chance; the NSP head is at chance on SOP"
        )
    if not sop_solves_nsp and nsp_fails_sop:
        return ClaimVerdict(c, NO_CLEAR, ours, "neither head solves the other's task above chance")
    return ClaimVerdict(
        c, DISAGREES, ours, "the NSP head solves sentence order above chance, so NSP subsumes some of SOP here"
    )


def _roberta(c: PaperClaim, ctx: _Context) -> ClaimVerdict:
    squad, qnli = ctx.diff("roberta", "squad"), ctx.diff("roberta", "qnli")
    if squad is None or qnli is None:
        return ClaimVerdict(c, NOT_YET, "", ctx.missing("roberta", ("squad", "qnli")))
    ours = f"{squad.text('SQuAD F1')}; {qnli.text('QNLI')}"
    if early := _one_seed(c, ours, squad, qnli):
        return early
    worse = [name for name, d in (("SQuAD", squad), ("QNLI", qnli)) if d.direction < 0]
    better = [name for name, d in (("SQuAD", squad), ("QNLI", qnli)) if d.direction > 0]
    if worse:
        why = f"clearly worse on {' and '.join(worse)}: dropping NSP did not match SEGMENT-PAIR + NSP here"
        return ClaimVerdict(c, DISAGREES, ours, why)
    proxy = " (QNLI stands in for MNLI, which the suite lacks)"
    if better:
        return ClaimVerdict(c, AGREES, ours, f"clearly better on {' and '.join(better)}, worse on neither" + proxy)
    return ClaimVerdict(
        c, NO_CLEAR, ours, "within the spread of BERT's row on both: it matches, as the paper found" + proxy
    )


def _span(c: PaperClaim, ctx: _Context) -> ClaimVerdict:
    squad = ctx.diff("span", "squad")
    others = [d for t in GLUE_TASKS if (d := ctx.diff("span", t)) is not None]
    if squad is None:
        return ClaimVerdict(c, NOT_YET, "", ctx.missing("span", ("squad",)))
    mean_other = statistics.fmean(d.delta for d in others) if others else None
    ours = squad.text("SQuAD F1") + (f"; mean difference on the GLUE tasks {mean_other:+.1f}" if others else "")
    if early := _one_seed(c, ours, squad):
        return early
    if squad.direction < 0:
        return ClaimVerdict(c, DISAGREES, ours, "span masking is clearly *worse* than BERT's on SQuAD here")
    if squad.direction == 0:
        return ClaimVerdict(c, NO_CLEAR, ours, "SQuAD is within the spread of BERT's row")
    if mean_other is not None and squad.delta <= mean_other:
        return ClaimVerdict(c, NO_CLEAR, ours, "SQuAD gains, but no more than the classification tasks do")
    return ClaimVerdict(c, AGREES, ours, "SQuAD gains clearly, and more than the classification tasks")


def in_short(verdicts: Sequence[ClaimVerdict]) -> str:
    """'Of the 5 claims, 2 agree, 1 shows no clear difference, 1 disagrees and 1 is not measured yet.'"""
    counts = {v: sum(x.verdict == v for x in verdicts) for v in (AGREES, NO_CLEAR, DISAGREES, UNTESTED, NOT_YET)}
    words = {  # (one, several)
        AGREES: ("agrees", "agree"),
        NO_CLEAR: ("shows no clear difference", "show no clear difference"),
        DISAGREES: ("disagrees", "disagree"),
        UNTESTED: ("is not tested because its run failed", "are not tested because their runs failed"),
        NOT_YET: ("is not measured yet", "are not measured yet"),
    }
    parts = [f"{n} {words[v][n != 1]}" for v, n in counts.items() if n]
    body = ", ".join(parts[:-1]) + (" and " if len(parts) > 1 else "") + parts[-1] if parts else "none measured"
    return f"Of the papers' {len(verdicts)} claims, {body}."


def pretraining_rows(record: SuccessorsRecord) -> list[dict]:
    """The pretraining record as the page's table: a row per finished variant in the suite's order, with
    what it cost (parameters, size, tokens, seconds), what it reached on held-out text, its sentence-pair
    head on both pair tasks and its fill-mask latency ('—': not measured)."""

    def pct(x: float | None) -> str:
        return "—" if x is None else f"{100 * x:.1f}%"

    out = []
    for key, label in SUCCESSOR_ROWS:
        r = record.row(key)
        if r is None:
            continue
        generator = f" (+ generator {r.generator_parameters / 1e6:.2f}M)" if r.generator_parameters else ""
        latency = "—"
        if r.latency_p50_ms is not None:
            latency = f"{r.latency_p50_ms:.1f} ms (p90 {r.latency_p90_ms:.1f}; {r.latency_threads} thread)"
        out.append(
            {
                "row": label,
                "parameters": (f"{r.parameters / 1e6:.2f}M" if r.parameters else "—") + generator,
                "size on disk": "—" if r.size_mb is None else f"{r.size_mb:.1f} MB",
                "tokens": "—" if r.tokens is None else f"{r.tokens / 1e6:.1f}M",
                "training time": "—" if r.train_s is None else f"{r.train_s / 60:.0f} min",
                "held-out masked LM": pct(r.mlm_acc) + (" (generator)" if r.generator_parameters else ""),
                "its own task": _own_task(r, pct),
                "pair head on NSP": pct(r.nsp_acc),
                "pair head on sentence order": pct(r.sop_acc),
                "fill-mask latency (p50)": latency,
            }
        )
    return out


def _own_task(r, pct) -> str:
    """'NSP 84.6%'; for ELECTRA with the rate it must beat and its AUC: 'replaced-token detection 87.0%
    (answering "original" everywhere: 87.0%; AUC 0.49)'."""
    if r.task_metric == "mlm_acc":
        return "—"
    text = f"{r.task_name} {pct(r.task_acc)}"
    if r.rtd_trivial_acc is not None:
        text += f" (answering 'original' everywhere: {pct(r.rtd_trivial_acc)}"
        text += f"; AUC {r.rtd_auc:.2f})" if r.rtd_auc is not None else ")"
    return text
