"""BERT's successors suite (issue #54): the papers' claims as printed, the suite's variants read from
configs/successors/*.yaml, and the state of each variant's pretraining run in the runs folder.

Owns: `PaperClaim` and `CLAIMS` (RoBERTa, ALBERT, SpanBERT and ELECTRA against BERT, each with its
source), `SuccessorVariant` with `suite_variants` (one per config: its family and objective from their
registries, and what it changes against the baseline, read from the two configs), `RunProgress` with
`run_progress`, `pretrain_command` / `job_args` (the variant as a terminal command and as a job), and the
fine-tuning of the finished rows (`finetune_spec`, `finetune_command`): the ablation suites' machinery
(bertlab.ablations.planning's "successors" table, each row given its run's model), so
`bertlab ablate run successors --row-model bert=runs/succ-bert/model ...` fine-tunes them as every table's
rows are, on SST-2, MRPC, QNLI, RTE and SQuAD with three seeds, and `bertlab ablate collect` reads them.

Torch-free. Imports bertlab.data.objectives, bertlab.models.registry, bertlab.training.pretrain_config,
bertlab.ablations.planning, bertlab.jobs (runs, spec), bertlab.storage (runfolder, modelfolder) and bertlab.errors.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bertlab.ablations.planning import SuiteSpec, command, suggested_spec
from bertlab.data.objectives import get_objective
from bertlab.errors import InputError
from bertlab.formatting import format_duration
from bertlab.jobs.runs import Job, read_job
from bertlab.jobs.spec import pretrain_args
from bertlab.models.registry import family_for
from bertlab.storage.modelfolder import has_config
from bertlab.storage.runfolder import ACTIVE_STATES, REPO_ROOT, is_run_dir, model_dir, read_metrics
from bertlab.training.pretrain_config import PretrainConfig, load_config_file

CONFIG_DIR = REPO_ROOT / "configs" / "successors"
BASELINE = "bert"  # the variant every other one is compared with: configs/successors/bert.yaml
# the text every variant reads, as the configs' own comments run them (../shared/data beside the checkout)
SUITE_CORPUS = "default, ../shared/data/corpus/gutenberg, ../shared/data/corpus/wikitext-2-raw"
SHIPPED_VOCAB = "checkpoints/bertlab-mini/vocab.txt"  # the WordPiece vocabulary of the WordPiece variants

CITATIONS = {
    "electra": "Clark, Luong, Le and Manning (2020). ELECTRA: Pre-training Text Encoders as Discriminators "
    "Rather Than Generators. ICLR. arXiv:2003.10555.",
    "albert": "Lan, Chen, Goodman, Gimpel, Sharma and Soricut (2019). ALBERT: A Lite BERT for Self-supervised "
    "Learning of Language Representations. ICLR 2020. arXiv:1909.11942.",
    "roberta": "Liu, Ott, Goyal, Du, Joshi, Chen, Levy, Lewis, Zettlemoyer and Stoyanov (2019). RoBERTa: A Robustly "
    "Optimized BERT Pretraining Approach. arXiv:1907.11692.",
    "span": "Joshi, Chen, Liu, Weld, Zettlemoyer and Levy (2019). SpanBERT: Improving Pre-training by Representing "
    "and Predicting Spans. TACL 2020. arXiv:1907.10529.",
}

SHORT_CITATIONS = {
    "electra": "Clark et al. 2020",
    "albert": "Lan et al. 2019",
    "roberta": "Liu et al. 2019",
    "span": "Joshi et al. 2019",
}


@dataclass(frozen=True)
class PaperClaim:
    """One claim of a successor's paper against BERT, with the numbers as printed."""

    key: str
    variant: str  # the suite's variant it concerns (a configs/successors/<variant>.yaml stem)
    paper: str  # a key of CITATIONS
    source: str  # where in the paper: "Table 1", "Section 4.6"
    what: str  # the claim in one sentence
    numbers: tuple[tuple[str, float | None, str], ...]  # (what was measured, value as printed, unit)
    note: str = ""

    @property
    def citation(self) -> str:
        return CITATIONS[self.paper]

    def numbers_text(self) -> str:
        """'ELECTRA-Small GLUE: 79.9; BERT-Small GLUE: 75.1'."""
        return "; ".join(f"{label}: {'—' if v is None else v}{unit}" for label, v, unit in self.numbers)


CLAIMS: tuple[PaperClaim, ...] = (
    PaperClaim(
        "electra_small",
        "electra",
        "electra",
        "Table 1",
        "At equal compute, replaced-token detection beats masked LM: ELECTRA-Small scores higher on GLUE than "
        "BERT-Small.",
        (("ELECTRA-Small GLUE score", 79.9, ""), ("BERT-Small GLUE score", 75.1, "")),
        note="GLUE dev set; both Small models (12 layers, H=256) trained with the same compute.",
    ),
    PaperClaim(
        "albert_size",
        "albert",
        "albert",
        "Table 2",
        "Shared layers and factorised embeddings cut the parameters ninefold for a small loss: ALBERT-base against "
        "BERT-base.",
        (
            ("ALBERT-base parameters", 12, "M"),
            ("BERT-base parameters", 108, "M"),
            ("ALBERT-base average", 80.1, ""),
            ("BERT-base average", 82.3, ""),
        ),
        note="The average is over SQuAD 1.1, SQuAD 2.0, MNLI, SST-2 and RACE (dev sets).",
    ),
    PaperClaim(
        "albert_sop",
        "albert",
        "albert",
        "Section 4.6, Table 5",
        "Sentence-order prediction subsumes NSP but not the other way round: a model trained on SOP solves NSP, "
        "one trained on NSP cannot solve SOP.",
        (("SOP-trained model on NSP", 78.9, "%"), ("NSP-trained model on SOP", 52.0, "%")),
        note="Intrinsic accuracies of ALBERT-base models on the pretraining tasks; 50% is chance on SOP.",
    ),
    PaperClaim(
        "roberta_no_nsp",
        "roberta",
        "roberta",
        "Table 2",
        "Dropping NSP and packing whole sentences (FULL-SENTENCES) matches or beats BERT's SEGMENT-PAIR inputs with "
        "NSP.",
        (
            ("FULL-SENTENCES, no NSP: SQuAD 1.1 F1", 90.4, ""),
            ("FULL-SENTENCES, no NSP: MNLI-m", 84.7, ""),
            ("SEGMENT-PAIR + NSP: SQuAD 1.1 F1", 90.4, ""),
            ("SEGMENT-PAIR + NSP: MNLI-m", 84.0, ""),
        ),
        note="BERT-base models trained on BookCorpus + Wikipedia for 1M steps at batch 256; dev sets.",
    ),
    PaperClaim(
        "span_squad",
        "span",
        "span",
        "Tables 1-3",
        "Masking whole spans instead of single tokens helps most on span-selection tasks: SpanBERT's largest "
        "gains over BERT are on SQuAD.",
        (),
        note="A direction, not a single number: read it as SQuAD gaining more than the classification tasks.",
    ),
)


# What each successor changed and why it was itself superseded, in plain words: the page's "In short"
IN_SHORT: dict[str, str] = {
    "bert": "**BERT** (2018) hides 15% of the words and learns to guess them (masked LM), and learns whether "
    "sentence B followed A (NSP). It set the pattern every model below keeps: pretrain once, fine-tune per task.",
    "roberta": "**RoBERTa** (2019) kept BERT's model and changed the recipe: no NSP, whole sentences packed to the "
    "length, fresh masks every epoch, bigger batches, ten times the text and a byte-level vocabulary. It showed BERT "
    "was undertrained; it was overtaken by models that change the objective or the architecture, not only the "
    "training.",
    "albert": "**ALBERT** (2019) shrank the parameters: one set of layer weights shared by every layer, a small "
    "embedding projected up, and sentence-order prediction instead of NSP. Fewer weights, but no less compute per "
    "token: sharing saves memory, not time, so at equal time it lost ground to ELECTRA and to plain larger models.",
    "span": "**SpanBERT** (2019) masks whole spans of words instead of single tokens and drops NSP, so the model "
    "must rebuild phrases from their surroundings. It helps most where answers are spans (SQuAD); its ideas lived on "
    "inside later objectives (T5's span corruption) rather than as a model of its own.",
    "electra": "**ELECTRA** (2020) lets a small generator replace some words and trains the main model to spot "
    "the replaced ones, learning from every token, not only the 15% masked. It is the most compute-efficient of "
    "these; larger decoder-style and instruction-tuned models later took over, but ELECTRA-style detection "
    "still trains strong small encoders (DeBERTa-v3).",
}


def claim_rows() -> list[dict]:
    """The papers' claims as table rows: the variant, the paper and where, the claim, its numbers."""
    return [
        {
            "variant": c.variant,
            "paper": SHORT_CITATIONS[c.paper],
            "where": c.source,
            "claim": c.what,
            "numbers": c.numbers_text() or "—",
        }
        for c in CLAIMS
    ]


# --------------------------------------------------------------------------------------
# The suite's variants, from their configs
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SuccessorVariant:
    """One row of the suite: a config of configs/successors/ and what it trains."""

    key: str  # the file's stem: "bert", "albert", ...
    config_path: str  # from the repository root, as `bertlab pretrain --config` takes it
    run_name: str  # the config's `name`: its run folder's name in the configs' commands
    family: str  # the model family's name (bertlab.models.registry)
    objective: str  # the objective's short name (bertlab.data.objectives)
    objective_description: str
    changes: tuple[str, ...]  # what differs from the baseline's config, one item each; () for the baseline
    max_tokens: int  # the pretraining budget in input tokens
    size: str
    tokenizer: str

    @property
    def is_baseline(self) -> bool:
        return self.key == BASELINE

    def changes_text(self) -> str:
        return "the baseline" if self.is_baseline else "; ".join(self.changes) or "nothing (same as the baseline)"


def _raw_config(path: Path) -> dict:
    import yaml  # with PyYAML, as pretrain_config reads configs

    try:
        return yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"{path}: cannot read this successors config ({exc}); fix or remove the file") from exc


def _flatten(data: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in data.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _changes(raw: dict, cfg: PretrainConfig, base_raw: dict, base: PretrainConfig) -> tuple[str, ...]:
    """What a config sets differently from the baseline's: the family and the objective in the registries'
    words, every other differing setting as `key: baseline → this`."""
    out: list[str] = []
    family, base_family = (family_for({"model_type": c.model_type}).name for c in (cfg, base))
    if family != base_family:
        out.append(f"model family: {base_family} → {family}")
    if cfg.data.objective != base.data.objective:
        out.append(f"objective: {base.data.objective_spec.short} → {cfg.data.objective_spec.short}")
    flat, base_flat = _flatten(raw), _flatten(base_raw)
    skip = {"name", "model_type", "data.objective"}  # the run's own name; said above in words
    for key in sorted(set(flat) | set(base_flat)):
        if key in skip or flat.get(key) == base_flat.get(key):
            continue
        out.append(f"{key}: {base_flat.get(key, '—')} → {flat.get(key, '—')}")
    return tuple(out)


def suite_variants(config_dir: str | Path = CONFIG_DIR) -> list[SuccessorVariant]:
    """One variant per YAML file of `config_dir`, the baseline first, each loaded as `bertlab pretrain` would.

    Raises:
        InputError: the folder has no baseline (bert.yaml), or a config does not load (the message says which).
    """
    folder = Path(config_dir)
    paths = sorted(folder.glob("*.yaml"), key=lambda p: (p.stem != BASELINE, p.stem))
    if not paths or paths[0].stem != BASELINE:
        raise InputError(f"{folder}: no {BASELINE}.yaml, the suite's baseline; restore it from git")
    base_raw = _raw_config(paths[0])
    base = load_config_file(paths[0])
    variants = []
    for path in paths:
        raw, cfg = _raw_config(path), load_config_file(path)
        try:
            shown = path.resolve().relative_to(REPO_ROOT).as_posix()
        except ValueError:
            shown = str(path)
        variants.append(
            SuccessorVariant(
                key=path.stem,
                config_path=shown,
                run_name=cfg.name,
                family=family_for({"model_type": cfg.model_type}).name,
                objective=cfg.data.objective_spec.short,
                objective_description=get_objective(cfg.data.objective).description,
                changes=() if path.stem == BASELINE else _changes(raw, cfg, base_raw, base),
                max_tokens=int(cfg.train.max_tokens or 0),
                size=str(cfg.size),
                tokenizer=cfg.tokenizer,
            )
        )
    return variants


def claims_for(variant: str) -> list[PaperClaim]:
    return [c for c in CLAIMS if c.variant == variant]


# --------------------------------------------------------------------------------------
# Commands and jobs
# --------------------------------------------------------------------------------------
def job_args(variant: SuccessorVariant) -> tuple[str, ...]:
    """The `bertlab pretrain` arguments of a variant's run on the suite's text (a job's args)."""
    vocab = () if variant.tokenizer == "bpe" else (f"vocab={SHIPPED_VOCAB}",)  # BPE trains its own
    return pretrain_args(config=variant.config_path, corpus=SUITE_CORPUS, overrides=(*vocab, "train.num_threads=1"))


def pretrain_command(variant: SuccessorVariant, runs_dir: str = "runs") -> str:
    """The variant's run from a terminal, into `runs_dir`/<its name>."""
    args = ["--config", variant.config_path, "--run-dir", f"{runs_dir}/{variant.run_name}", *job_args(variant)[2:]]
    return "bertlab pretrain " + shlex.join(args)


# --------------------------------------------------------------------------------------
# Runs so far
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RunProgress:
    """Where a variant's pretraining run stands, read from its run folder."""

    run_dir: Path
    state: str  # bertlab.storage.runfolder.STATES
    step: int
    progress: float | None  # 0..1 of its budget
    tokens: int | None  # input tokens seen at its last logged step
    eta_s: float | None
    mlm_accuracy: float | None  # held-out masked-token accuracy at its last evaluation
    eval_step: int | None  # the step of that evaluation
    eval_tokens: int | None
    curve: tuple[tuple[int, float], ...] = ()  # (tokens, held-out masked-LM accuracy) per evaluation
    # the last evaluation's other held-out accuracies, by TASK_NAMES key: {"nsp": 0.78} or {"sop": ...}, {"rtd": ...}
    task_accuracies: dict[str, float] = field(default_factory=dict)

    def summary(self) -> str:
        """'running, 60% (19.1M tokens), 18 min left; held-out masked-LM accuracy 20.3%, NSP 77.5% at 19.0M tokens'."""
        parts = [self.state]
        if self.progress is not None:
            seen = f" ({self.tokens / 1e6:.1f}M tokens)" if self.tokens else ""
            left = f", {format_duration(self.eta_s)} left" if self.eta_s and self.state in ACTIVE_STATES else ""
            parts[0] += f", {self.progress:.0%}{seen}{left}"
        if self.mlm_accuracy is not None:
            at = f" at {self.eval_tokens / 1e6:.1f}M tokens" if self.eval_tokens else f" at step {self.eval_step}"
            others = "".join(f", {TASK_NAMES.get(k, k)} {v:.1%}" for k, v in self.task_accuracies.items())
            parts.append(f"held-out masked-LM accuracy {self.mlm_accuracy:.1%}{others}{at}")
        else:
            parts.append("no held-out evaluation yet")
        return "; ".join(parts)


# the held-out accuracies a run's evaluation logs beside masked LM (`<task>_acc`), as the table names them
TASK_NAMES = {
    "nsp": "NSP",
    "sop": "sentence order",
    "rtd": "replaced-token detection",
    "rtd_trivial": "answering 'original' everywhere",  # the rate replaced-token detection must beat
    "sbo": "span boundary",
}


def suite_rows(variants: list[SuccessorVariant], runs_dir: str | Path) -> list[dict]:
    """The suite as table rows: each variant's config, family, objective, changes and its run's state."""
    rows = []
    for v in variants:
        run = run_progress(runs_dir, v)
        rows.append(
            {
                "variant": v.key,
                "config": v.config_path,
                "family": v.family,
                "objective": v.objective,
                "changes against the baseline": v.changes_text(),
                "pretraining run": run.summary() if run else "not run yet",
            }
        )
    return rows


def variant_runs(runs_dir: str | Path, variant: SuccessorVariant) -> list[Job]:
    """The variant's runs: the folder named after its config (`runs_dir`/succ-albert, as its command names
    it) and those the job registry made from it (succ-albert-20261205-094700), a running one first, then
    the newest. A folder whose name only starts alike (succ-bert-lr1.5e-3) is another run's."""
    folder = Path(runs_dir)
    if not folder.is_dir():
        return []
    own = re.compile(rf"{re.escape(variant.run_name)}(-\d{{8}}-\d{{6}}(-\d+)?)?")
    jobs = [read_job(p) for p in folder.iterdir() if own.fullmatch(p.name) and is_run_dir(p)]
    return sorted(jobs, key=lambda j: (j.state in ACTIVE_STATES, j.submitted), reverse=True)


def run_progress(runs_dir: str | Path, variant: SuccessorVariant) -> RunProgress | None:
    """Where the variant's run stands (its first in `variant_runs`), or None when it has none."""
    runs = variant_runs(runs_dir, variant)
    if not runs:
        return None
    job = runs[0]
    run_dir = job.run_dir
    evals = [m for m in read_metrics(run_dir) if m.get("split") == "eval" and m.get("mlm_acc") is not None]
    last_eval = evals[-1] if evals else None
    last_train = job.status.get("last_train") or {}
    return RunProgress(
        run_dir=run_dir,
        state=job.state,
        step=job.step,
        progress=job.progress,
        tokens=last_train.get("tokens"),
        eta_s=job.eta_s,
        mlm_accuracy=None if last_eval is None else float(last_eval["mlm_acc"]),
        eval_step=None if last_eval is None else int(last_eval.get("step", 0)),
        eval_tokens=None if last_eval is None else last_eval.get("tokens"),
        curve=tuple((int(m.get("tokens") or 0), float(m["mlm_acc"])) for m in evals),
        task_accuracies={
            k.removesuffix("_acc"): float(v)
            for k, v in (last_eval or {}).items()
            if k.endswith("_acc") and k != "mlm_acc" and isinstance(v, (int, float))
        },
    )


# --------------------------------------------------------------------------------------
# Fine-tuning the finished rows
# --------------------------------------------------------------------------------------
def finished_models(variants: list[SuccessorVariant], runs_dir: str | Path) -> tuple[tuple[str, str], ...]:
    """(variant, model folder) for each variant whose pretraining run has finished, in the suite's order
    (an ELECTRA run's folder is its pair: its discriminator fine-tunes)."""
    out = []
    for v in variants:
        run = run_progress(runs_dir, v)
        if run is not None and run.state == "finished" and has_config(model_dir(run.run_dir)):
            out.append((v.key, str(model_dir(run.run_dir))))
    return tuple(out)


def finetune_spec(variants: list[SuccessorVariant], runs_dir: str | Path) -> SuiteSpec:
    """The suite that fine-tunes every finished row as the ablation tables' rows are: the "successors" table's
    recipe (SST-2, MRPC, QNLI, RTE, SQuAD; three seeds; Table 5's per-task epochs and learning rates; 8,000
    training examples, every dev example; one thread a job), each row given its run's model."""
    return replace(suggested_spec("successors"), row_models=finished_models(variants, runs_dir))


def finetune_command(variants: list[SuccessorVariant], runs_dir: str | Path) -> str | None:
    """The `bertlab ablate run successors ...` line for the finished rows, or None while none has finished."""
    spec = finetune_spec(variants, runs_dir)
    return command(spec) if spec.row_models else None
