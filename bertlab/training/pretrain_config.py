"""A pretraining run's settings: `PretrainConfig` (every field is saved in run_config.json),
`load_config_file`, which reads a YAML/JSON config and applies `section.key=value` overrides, and
`add_args`, the arguments of `bertlab pretrain` (torch-free, so that bertlab.jobs.spec checks a
queued job's arguments with them before anything heavy is imported).
Every value is checked when the config is read (types, ranges, the data sections of `phase2` and
`eval_data`), so a bad config fails before any data is prepared.

Imports bertlab.config (presets, field coercion), bertlab.data.corpus (the default corpus's name),
bertlab.errors, bertlab.data.pretraining_data (DataConfig), bertlab.data.objectives (which family an
objective trains) and bertlab.training.trainer (TrainConfig); yaml when a file or an override is read.
The recipe that runs a config is bertlab.training.pretrain.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bertlab.config import BERT_FIELDS, BertConfig, coerce_field, dataclass_from_dict, preset
from bertlab.data.corpus import DEFAULT_CORPUS
from bertlab.data.data_config import DataConfig
from bertlab.data.objectives import OBJECTIVES, Objective
from bertlab.errors import InputError
from bertlab.models.registry import HEAD_TITLES, family_for, known_model_types
from bertlab.training.types import TrainConfig

TOKENIZERS = ("wordpiece", "bpe")  # BERT's WordPiece; RoBERTa's byte-level BPE (bertlab.models.roberta_tokenizer)


@dataclass(frozen=True)
class PretrainConfig:
    """A whole pretraining run: every field is saved in run_config.json."""

    name: str = "bertlab-run"
    size: str = "mini"  # a preset: tiny, mini, small, medium, base, large
    model_type: str = "bert"  # the model family the run builds (bertlab.models.registry), as in config.json
    model_overrides: dict = field(default_factory=dict)  # BertConfig fields, e.g. {"num_layers": 2}
    corpus: tuple[str, ...] = (DEFAULT_CORPUS,)  # files, folders, "default" (gensim's Wikipedia sample), "hf:..."
    corpus_format: str = "auto"  # auto | google | prose | wikitext | jsonl
    vocab: str | None = None  # an existing vocab.txt (bpe: vocab.json, merges.txt beside it); None trains one
    vocab_size: int = 8192  # for a new vocabulary
    lowercase: bool = True  # WordPiece's; a byte-level BPE is cased, as RoBERTa's
    tokenizer: str = "wordpiece"  # one of TOKENIZERS: BERT's WordPiece, or RoBERTa's byte-level BPE ("bpe")
    data: DataConfig = field(default_factory=DataConfig)
    train: TrainConfig = field(default_factory=lambda: TrainConfig(max_steps=1000))
    cache_dir: str = "~/.cache/bertlab/data"
    eval_instances: int = 2000  # held-out instances evaluated at each eval (fixed set)
    dropout: float | None = None  # dropout while pretraining (None: the config's 0.1); the saved config keeps 0.1
    init_from: str | None = (
        None  # a checkpoint folder whose weights (and vocab.txt) start the run: continued pretraining
    )
    # with init_from: copy its first N positions again and again to fill the position table (Longformer's
    # initialisation), for a model that saw only N-token inputs (the rest of its table is untrained); 0 = keep
    copy_positions: int = 0
    # The paper's two-phase schedule: {"at": 0.9, "max_seq_length": 512, "max_predictions_per_seq": 77} switches
    # the data (any `data` fields) at that fraction of the budget, keeping the optimizer and LR schedule.
    phase2: dict = field(default_factory=dict)
    # How held-out instances are made: `data` fields over the last phase's (e.g. {max_seq_length: 128,
    # masked_lm_prob: 0.15}), so runs that train differently are scored on the same instances.
    eval_data: dict = field(default_factory=dict)
    # Where held-out documents come from, when not from `corpus`: that corpus's held-out split (same
    # seed and fraction), and training then skips any document equal to one of them. Runs on more or
    # less data are so scored on the same documents as the runs on this corpus.
    heldout_corpus: tuple[str, ...] = ()

    def phase_data(self) -> list[DataConfig]:
        """The data config of each phase (one, or two with `phase2`)."""
        if not self.phase2:
            return [self.data]
        fields = {k: v for k, v in self.phase2.items() if k != "at"}
        return [self.data, dataclass_from_dict(DataConfig, {**asdict(self.data), **fields}, "phase2")]

    def heldout_data(self) -> DataConfig:
        last = self.phase_data()[-1]
        if not self.eval_data:
            return last
        return dataclass_from_dict(DataConfig, {**asdict(last), **self.eval_data}, "eval_data")

    @property
    def phase2_at(self) -> float:
        at = coerce_field(self.phase2.get("at", 0.9), "float", "phase2.at")
        if not 0.0 < at < 1.0:
            raise InputError(f"phase2.at must be a fraction of the budget between 0 and 1, got {at}")
        return at

    def model_config(self, vocab_size: int) -> BertConfig:
        """The BERT-shaped part of the model's config: the size preset, the objective's heads and
        attention, and the BertConfig fields of `model_overrides` (the family's own keys, such as
        ALBERT's embedding_size, are `family_overrides`, which the family reads)."""
        objective = self.data.objective_spec  # which heads and attention the objective needs
        overrides = {
            "vocab_size": vocab_size,
            "use_nsp_head": objective.nsp,
            "span_boundary_head": objective.span_boundary,
            "attention_direction": objective.attention_direction,
        }
        overrides.update({k: v for k, v in self.model_overrides.items() if k in BERT_FIELDS})
        overrides.setdefault("max_position_embeddings", 512)
        return preset(self.size, **overrides)

    @property
    def family_overrides(self) -> dict:
        """`model_overrides` keys that are the family's own (config.json keys), checked against its entry.

        Raises:
            InputError: a key neither BertConfig nor the family knows (a typo).
        """
        own = family_for({"model_type": self.model_type}, "model_type").config_keys
        unknown = sorted(k for k in self.model_overrides if k not in BERT_FIELDS and k not in own)
        if unknown:
            raise InputError(
                f"model_overrides: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(BERT_FIELDS | set(own)))}"
            )
        return {k: v for k, v in self.model_overrides.items() if k in own}

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> PretrainConfig:
        data = dict(data)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise InputError(f"unknown config keys {sorted(unknown)}; known: {sorted(known)}")
        if "data" in data:
            data["data"] = dataclass_from_dict(DataConfig, data["data"], "data")
        if "train" in data:
            data["train"] = dataclass_from_dict(TrainConfig, data["train"], "train")
        for k in ("vocab_size", "eval_instances"):
            if k in data:
                data[k] = coerce_field(data[k], "int", k)
        if data.get("dropout") is not None:
            data["dropout"] = coerce_field(data["dropout"], "float", "dropout")
            if not 0.0 <= data["dropout"] < 1.0:
                raise InputError(f"dropout must be in [0, 1), got {data['dropout']}")
        if "lowercase" in data:
            data["lowercase"] = coerce_field(data["lowercase"], "bool", "lowercase")
        for k in ("corpus", "heldout_corpus"):
            if k in data:
                c = data[k] or ()
                data[k] = tuple([c] if isinstance(c, str) else c)
        if data.get("tokenizer") == "bpe":
            if data.get("lowercase") is True:
                raise InputError("tokenizer=bpe is cased, as RoBERTa's byte-level BPE: leave out lowercase=true")
            data["lowercase"] = False  # the default's True is WordPiece's
        cfg = cls(**data)
        if cfg.tokenizer not in TOKENIZERS:
            raise InputError(f"tokenizer must be one of {', '.join(TOKENIZERS)}, not {cfg.tokenizer!r}")
        if cfg.model_type not in known_model_types():
            raise InputError(f"model_type must be one of {', '.join(known_model_types())}, not {cfg.model_type!r}")
        cfg.family_overrides  # noqa: B018  (checks model_overrides' keys now, not mid-run)
        if cfg.copy_positions < 0 or (cfg.copy_positions and not cfg.init_from):
            raise InputError("copy_positions copies init_from's first N positions: give init_from and N >= 1")
        check_objective_fits_family(cfg.data.objective_spec, cfg.model_type)
        for name in ("phase2", "eval_data"):
            if not isinstance(getattr(cfg, name), dict):
                raise InputError(f"{name} must be a mapping of data fields, e.g. {{max_seq_length: 128}}")
        try:  # validate now, not mid-run
            if cfg.phase2:
                cfg.phase2_at  # noqa: B018
                cfg.phase_data()
        except InputError as exc:
            raise InputError(f"phase2: {exc}") from None
        try:
            cfg.heldout_data()
        except InputError as exc:
            raise InputError(f"eval_data: {exc}") from None
        return cfg


def check_objective_fits_family(objective: Objective, model_type: str) -> None:
    """An objective made for one family (ELECTRA's) trains only that family, which trains with no other;
    an objective's heads beyond the masked LM (NSP, sentence order, span boundary) must be ones the family has.

    Raises:
        InputError: the objective names another family, the family has objectives of its own, or it
            lacks one of the objective's heads.
    """
    if objective.model_type not in (None, model_type):
        raise InputError(
            f"data.objective={objective.name} trains model_type={objective.model_type}, not {model_type}: "
            f"set model_type={objective.model_type}"
        )
    own = [o.name for o in OBJECTIVES.values() if o.model_type == model_type]
    if own and objective.name not in own:
        raise InputError(
            f"model_type={model_type} trains with data.objective={' or '.join(own)} only, not {objective.name}: "
            f"set data.objective={own[0]}"
        )
    family = family_for({"model_type": model_type}, "model_type")
    for head in objective.heads:
        if head not in family.heads:
            raise InputError(  # ALBERT has a sentence-order head and no NSP head; BERT the other way round
                f"data.objective={objective.name} trains a {HEAD_TITLES[head]} head, and "
                f"{family.name} has none (its heads: {', '.join(family.heads)}): pick another objective, e.g. mlm"
            )


def _parse_value(text: str) -> Any:
    """An override's value as YAML reads it (3 -> int, [a, b] -> list); text that is not YAML stays text."""
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text


def load_config_file(path: str | Path | None, overrides: list[str] | None = None) -> PretrainConfig:
    """Read a YAML/JSON config and apply `section.key=value` overrides."""
    data: dict = {}
    if path:
        p = Path(path)
        if not p.is_file():
            raise InputError(f"{p}: config file not found")
        import yaml

        try:
            data = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise InputError(f"{p}: not valid YAML ({exc})") from exc
    for item in overrides or []:
        if "=" not in item:
            raise InputError(f"override {item!r} must look like section.key=value (e.g. train.max_steps=100)")
        key, value = item.split("=", 1)
        node = data
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = _parse_value(value)
    return PretrainConfig.from_dict(data)


def override_keys() -> str:
    """Every key an override can set, with its default (YAML-style): the help of `bertlab pretrain`."""

    def shown(value: Any) -> str:
        if isinstance(value, tuple | list):
            return "[" + ", ".join(shown(v) for v in value) + "]"
        if isinstance(value, bool):
            return str(value).lower()
        return "" if value is None else str(value)

    def listed(obj: Any, prefix: str = "") -> str:
        parts = [
            f"{prefix}{f.name}={shown(getattr(obj, f.name))}"
            for f in dataclasses.fields(obj)
            if f.name not in ("data", "train")
        ]
        return "  " + "\n  ".join(parts)

    defaults = PretrainConfig()
    return (
        "keys (key=default), set as key=value after the config; lists as [a, b], mappings as {a: 1}:\n"
        f"{listed(defaults)}\n{listed(defaults.data, 'data.')}\n{listed(defaults.train, 'train.')}\n"
        "one budget is needed: train.max_steps, train.max_tokens or train.max_time_s (0 = none); "
        "model_overrides takes BertConfig fields (num_layers, hidden_size, num_heads, intermediate_size, ...) "
        "and the family's own keys\n"
        f"{objectives_help()}\nmodel families (model_type=): {', '.join(known_model_types())}"
    )


def objectives_help() -> str:
    """One line per pretraining objective: `data.objective=NAME: what it is` (the help's list)."""
    return "objectives (data.objective=):\n" + "\n".join(f" - {o.name}: {o.description}" for o in OBJECTIVES.values())


def add_args(p: argparse.ArgumentParser) -> None:
    """The arguments of `bertlab pretrain` (its help lists every key an override can set)."""
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.epilog = override_keys()
    p.add_argument("--config", help="YAML config (see configs/)")
    p.add_argument(
        "overrides",
        nargs="*",
        help="key=value or section.key=value, e.g. corpus=[default, my.txt] train.max_steps=200 "
        "data.masking=dynamic (every key below)",
    )
    p.add_argument("--run-dir", help="run folder (default: runs/<name>-<time> in $BERTLAB_RUNS or the repository)")
    p.add_argument("--resume", action="store_true", help="continue the run in --run-dir from its last checkpoint")
    p.add_argument("--dry-run", action="store_true", help="run the whole pipeline for one step")
    p.add_argument("--no-progress", action="store_true", help="no terminal progress bar")
