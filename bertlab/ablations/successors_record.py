"""The successors suite's pretraining record (issue #54): what each variant's finished run cost and
reached, read from its run folder, kept as two committed CSV files and read back for the page.

    results/successors/pretraining.csv   one row per variant (`PretrainingRow`, columns `PRETRAINING_COLUMNS`)
    results/successors/curves.csv        every held-out evaluation of every variant (`CurvePoint`, `CURVE_COLUMNS`)

A row: the variant, its family and objective; parameters counted from the saved weights (an ELECTRA
pair's discriminator, the half that fine-tunes, and its generator apart) and the weights' size on disk
(a pair's halves together and each); the pretraining tokens and seconds and the held-out accuracies
at the run's last evaluation (masked LM, and its own task's: NSP, sentence order, replaced-token
detection, or masked LM for a variant that trains nothing else). What needs torch is measured by
bench/successors_record.py and filled in there: a sentence-pair head's accuracy on held-out NSP and
sentence-order instances, both ways (bertlab.training.pair_tasks), and fill-mask latency.

`read_suite_runs` reads the runs (finished ones only: the others are skipped with a note),
`write_record` writes the two files, `read_record` reads them back as typed rows that a page shows
without torch.

Torch-free. Imports bertlab.ablations.successors (the suite's variants and their run folders),
bertlab.data.objectives (which sentence-pair head an objective trains), bertlab.jobs (metric lines), bertlab.models.registry (family names), bertlab.storage (runfolder,
modelfolder) and bertlab.errors.
"""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bertlab.ablations.successors import TASK_NAMES, SuccessorVariant, suite_variants, variant_runs
from bertlab.data.objectives import get_objective
from bertlab.errors import InputError
from bertlab.jobs.metric_lines import finite, split_metrics
from bertlab.models.registry import family_for
from bertlab.storage.modelfolder import WEIGHTS_FILES, halves, stored_parameter_count, weights_path
from bertlab.storage.runfolder import REPO_ROOT, has_model, model_dir, read_metrics, read_run_config

RECORD_DIR = REPO_ROOT / "results" / "successors"
PRETRAINING_FILE = "pretraining.csv"
CURVES_FILE = "curves.csv"
MLM_METRIC = "mlm_acc"
# an eval line's keys that say where it was taken, not what it measured
_WHERE = ("split", "step", "time", "tokens", "train_s")


@dataclass(frozen=True)
class PretrainingRow:
    """One variant's finished pretraining run, as pretraining.csv holds it (None: not measured)."""

    variant: str  # configs/successors/<variant>.yaml
    run: str  # its run folder's name
    family: str  # bertlab.models.registry's name: "BERT", "ELECTRA", ...
    objective: str  # bertlab.data.objectives' name: "mlm_nsp", "mlm_sop", "electra", ...
    steps: int
    tokens: int | None  # input tokens seen by its last evaluation
    train_s: float | None  # training seconds by then (evaluation and saving not counted)
    parameters: int | None  # of the model that fine-tunes: ELECTRA's discriminator; the whole model otherwise
    generator_parameters: int | None  # an ELECTRA pair's generator, apart (the embeddings it shares counted in both)
    size_mb: float | None  # the model folder's weight files, in MB (10^6 bytes): a pair's halves together
    discriminator_size_mb: float | None  # an ELECTRA pair's halves, each
    generator_size_mb: float | None
    mlm_acc: float | None  # held-out masked-token accuracy at the last evaluation (ELECTRA: its generator's)
    task_metric: str  # the eval key of its own task: "nsp_acc", "sop_acc", "rtd_acc", or "mlm_acc"
    task_acc: float | None  # ... and its value at the last evaluation
    pair_head: str  # the sentence-pair head it trained ("nsp", "sop"), "" for none
    nsp_acc: float | None = None  # that head on held-out NSP instances (bench/successors_record.py)
    nsp_instances: int | None = None
    sop_acc: float | None = None  # ... and on held-out sentence-order instances
    sop_instances: int | None = None
    latency_p50_ms: float | None = None  # fill-mask wall time of one sentence (ELECTRA: its generator answers)
    latency_p90_ms: float | None = None
    latency_threads: int | None = None
    latency_calls: int | None = None  # timed calls the percentiles are over
    # ELECTRA's discriminator on held-out tokens (bertlab.training.replaced_eval): the accuracy of answering
    # "original" everywhere, the rate rtd accuracy must beat, and the AUC of P(replaced) (0.5: no signal)
    rtd_trivial_acc: float | None = None
    rtd_auc: float | None = None

    @property
    def task_name(self) -> str:
        """Its own task in words: 'NSP', 'sentence order', 'replaced-token detection', 'masked LM'."""
        return TASK_NAMES.get(self.task_metric.removesuffix("_acc"), "masked LM")


@dataclass(frozen=True)
class CurvePoint:
    """One held-out metric of one evaluation of a variant's run, as curves.csv holds it."""

    variant: str
    step: int
    tokens: int | None
    train_s: float | None
    metric: str  # the eval line's key: "mlm_acc", "mlm_loss", "nsp_acc", ...
    value: float


PRETRAINING_COLUMNS = tuple(f.name for f in dataclasses.fields(PretrainingRow))
CURVE_COLUMNS = tuple(f.name for f in dataclasses.fields(CurvePoint))


@dataclass(frozen=True)
class SuiteRuns:
    """What `read_suite_runs` found: the finished variants' rows and curves, and why the others were left out."""

    rows: tuple[PretrainingRow, ...]
    curves: tuple[CurvePoint, ...]
    skipped: tuple[str, ...]  # one line per variant left out: "albert: no run folder in /work/runs"
    run_dirs: dict[str, Path] = dataclasses.field(default_factory=dict)  # variant -> its run folder (finished rows)


@dataclass(frozen=True)
class SuccessorsRecord:
    """The committed record, read back."""

    rows: tuple[PretrainingRow, ...]
    curves: tuple[CurvePoint, ...]

    def row(self, variant: str) -> PretrainingRow | None:
        return next((r for r in self.rows if r.variant == variant), None)

    def curve(self, variant: str, metric: str = MLM_METRIC, x: str = "tokens") -> list[tuple[float, float]]:
        """(x, value) of one variant's metric, in step order; x is "tokens", "train_s" or "step"."""
        if x not in ("tokens", "train_s", "step"):
            raise InputError(f"x must be tokens, train_s or step, not {x!r}")
        points = sorted((p for p in self.curves if p.variant == variant and p.metric == metric), key=lambda p: p.step)
        return [(getattr(p, x), p.value) for p in points if getattr(p, x) is not None]


# --------------------------------------------------------------------------------------
# Reading the runs
# --------------------------------------------------------------------------------------
def _megabytes(files: Sequence[Path]) -> float | None:
    return round(sum(f.stat().st_size for f in files) / 1e6, 3) if files else None


def _weight_files(folder: Path) -> list[Path]:
    return [folder / n for n in WEIGHTS_FILES if (folder / n).is_file()]


def model_size(folder: str | Path, finetune_half: str = "") -> dict:
    """Parameters and MB of weights of a model folder: `parameters`, `size_mb`; for a pair folder, the
    `finetune_half`'s parameters, the generator's apart, and each half's MB beside the pair's."""
    folder = Path(folder)
    pair = halves(folder) if weights_path(folder) is None else {}
    if not pair:
        return {"parameters": stored_parameter_count(folder), "size_mb": _megabytes(_weight_files(folder))}
    if finetune_half not in pair:
        raise InputError(f"{folder}: a pair folder of {', '.join(pair)}, none of them the half that fine-tunes")
    return {
        "parameters": stored_parameter_count(pair[finetune_half]),
        "generator_parameters": stored_parameter_count(pair["generator"]) if "generator" in pair else None,
        "size_mb": _megabytes([f for half in pair.values() for f in _weight_files(half)]),
        **{f"{name}_size_mb": _megabytes(_weight_files(half)) for name, half in pair.items()},
    }


def own_task_metric(eval_line: dict) -> str:
    """The eval key of a run's own task: its other held-out accuracy (nsp_acc, sop_acc, rtd_acc), or
    masked LM's for a variant that trains masked LM only."""
    others = [k for k in TASK_NAMES if finite(eval_line.get(f"{k}_acc"))]
    return f"{others[0]}_acc" if others else MLM_METRIC


def _number(value: object) -> float | None:
    return float(value) if finite(value) else None


def run_row(variant: str, run_dir: str | Path) -> tuple[PretrainingRow, list[CurvePoint]]:
    """A finished run's row (the torch-measured fields left None) and its held-out curves.

    Raises:
        InputError: the folder has no run_config.json, no model or no held-out evaluation.
    """
    run_dir = Path(run_dir)
    saved = read_run_config(run_dir)
    if not saved or "config" not in saved:
        raise InputError(f"{run_dir}: no run_config.json of a pretraining run")
    config = saved["config"]
    family = family_for({"model_type": config.get("model_type", "bert")}, f"{run_dir}/run_config.json")
    _, evals = split_metrics(read_metrics(run_dir))
    if not evals:
        raise InputError(f"{run_dir}: no held-out evaluation in its metrics.jsonl; the run never evaluated")
    if not has_model(run_dir):
        raise InputError(f"{run_dir}: no model/ folder; the run has not written its final model")
    last = evals[-1]
    task = own_task_metric(last)
    sizes = model_size(model_dir(run_dir), family.finetune_half)
    objective = str((config.get("data") or {}).get("objective", ""))
    row = PretrainingRow(
        variant=variant,
        run=run_dir.name,
        family=family.name,
        objective=objective,
        steps=int(last["step"]),
        tokens=int(last["tokens"]) if finite(last.get("tokens")) else None,
        train_s=_number(last.get("train_s")),
        parameters=sizes.get("parameters"),
        generator_parameters=sizes.get("generator_parameters"),
        size_mb=sizes.get("size_mb"),
        discriminator_size_mb=sizes.get("discriminator_size_mb"),
        generator_size_mb=sizes.get("generator_size_mb"),
        mlm_acc=_number(last.get(MLM_METRIC)),
        task_metric=task,
        task_acc=_number(last.get(task)),
        pair_head=get_objective(objective).pair_head or "",
    )
    curves = [
        CurvePoint(
            variant,
            int(m["step"]),
            int(m["tokens"]) if finite(m.get("tokens")) else None,
            _number(m.get("train_s")),
            key,
            float(value),
        )
        for m in evals
        for key, value in m.items()
        if key not in _WHERE and finite(value)
    ]
    return row, curves


def read_suite_runs(runs_dir: str | Path, variants: Sequence[SuccessorVariant] | None = None) -> SuiteRuns:
    """Each variant's finished run in `runs_dir` (the folder its config names, or the newest the job
    registry made from it: successors.variant_runs), as rows and curves; a variant with no run, or
    whose run has not finished or lacks its model, is skipped with a note saying so."""
    rows, curves, skipped, run_dirs = [], [], [], {}
    for variant in suite_variants() if variants is None else variants:
        runs = variant_runs(runs_dir, variant)
        if not runs:
            skipped.append(f"{variant.key}: no run folder {variant.run_name} in {runs_dir}")
            continue
        job = runs[0]
        if job.state != "finished":
            at = f" at {job.progress:.0%} of its budget" if job.progress is not None else ""
            skipped.append(f"{variant.key}: {job.run_dir} is {job.state}{at}, not finished")
            continue
        try:
            row, points = run_row(variant.key, job.run_dir)
        except InputError as exc:
            skipped.append(f"{variant.key}: {exc}")
            continue
        rows.append(row)
        curves.extend(points)
        run_dirs[variant.key] = job.run_dir
    return SuiteRuns(tuple(rows), tuple(curves), tuple(skipped), run_dirs)


# --------------------------------------------------------------------------------------
# The record's files
# --------------------------------------------------------------------------------------
def _write_csv(path: Path, records: Sequence, columns: Sequence[str]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(columns))
        writer.writeheader()
        for record in records:
            writer.writerow({k: "" if v is None else v for k, v in dataclasses.asdict(record).items()})
    return path


def write_record(folder: str | Path, rows: Sequence[PretrainingRow], curves: Sequence[CurvePoint]) -> tuple[Path, Path]:
    """pretraining.csv and curves.csv in `folder` (made if missing); returns their paths."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    return (
        _write_csv(folder / PRETRAINING_FILE, rows, PRETRAINING_COLUMNS),
        _write_csv(folder / CURVES_FILE, curves, CURVE_COLUMNS),
    )


def _parser(annotation: str):
    """A CSV cell -> the field's type, from its annotation ('int | None', 'float', 'str')."""
    kind = int if annotation.startswith("int") else float if annotation.startswith("float") else str
    optional = "None" in annotation

    def parse(text: str, column: str, where: str):
        if text == "":
            if optional or kind is str:
                return None if optional else ""
            raise InputError(f"{where}: column {column} is empty; write the record again (bench/successors_record.py)")
        try:
            return kind(float(text)) if kind is int else kind(text)
        except ValueError:
            raise InputError(f"{where}: column {column} holds {text!r}, not a {kind.__name__}") from None

    return parse


def _read_csv(path: Path, cls: type) -> list:
    fields = {f.name: _parser(str(f.type)) for f in dataclasses.fields(cls)}
    required = [f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING]
    with path.open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in required if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError(f"{path}: no column {', '.join(missing)}; write it again with bench/successors_record.py")
        out = []
        for n, raw in enumerate(reader, start=2):
            where = f"{path} line {n}"
            out.append(cls(**{k: parse(raw[k], k, where) for k, parse in fields.items() if k in raw}))
    return out


def read_record(folder: str | Path = RECORD_DIR) -> SuccessorsRecord:
    """The committed record in `folder`; an empty one where its files are not written yet.

    Raises:
        InputError: a file lacks a column, or a cell is not of its column's type (the message says where).
    """
    folder = Path(folder)
    rows = _read_csv(folder / PRETRAINING_FILE, PretrainingRow) if (folder / PRETRAINING_FILE).is_file() else []
    curves = _read_csv(folder / CURVES_FILE, CurvePoint) if (folder / CURVES_FILE).is_file() else []
    return SuccessorsRecord(tuple(rows), tuple(curves))
