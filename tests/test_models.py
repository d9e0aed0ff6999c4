"""bertlab.models: families found from config.json's model_type, and the two seams a successor needs.

The toy family below (a BERT with one more head, which guesses how long the input is) lives in this
test module and registers in-process, as a family of the package's own would; a toy objective
brings its own loss. Both pretrain for 2 steps through the real recipe and trainer, save, and load
back with their head. This module is the toy family's implementation (`Family.implementation`).
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import ClassVar

import pytest
import torch
from test_objectives import FirstWordMasker
from test_pretrain import _config
from torch import nn

from bertlab.config import BertConfig
from bertlab.data import maskers
from bertlab.data.objectives import OBJECTIVES, Objective
from bertlab.errors import CheckpointError, InputError
from bertlab.inference import load_model
from bertlab.losses import IGNORE, LOSSES, ObjectiveOutput, masked_lm_score
from bertlab.model import BertForPreTraining, PreTrainingOutput
from bertlab.models import bert
from bertlab.models.registry import FAMILIES, Family, family_for, register_family, unregister_family
from bertlab.storage.checkpoint import load_config, load_pretraining_model
from bertlab.storage.runfolder import read_metrics
from bertlab.training.pretrain import run_pretraining
from bertlab.training.pretrain_config import PretrainConfig


# --------------------------------------------------------------------------------------
# The toy family: this module's functions are what the registry entry names
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LengthBertConfig(BertConfig):
    model_type: ClassVar[str] = "length_bert"


@dataclass
class LengthOutput(PreTrainingOutput):
    log_length: torch.Tensor | None = None  # (B,) the length head's guess of log(number of tokens)


class LengthBertForPreTraining(BertForPreTraining):
    """BERT plus a head on [CLS]'s pooled vector that guesses log(input length)."""

    def __init__(self, config: LengthBertConfig):
        super().__init__(config)
        self.length_head = nn.Linear(config.hidden_size, 1)

    def forward(self, *args, **kwargs) -> LengthOutput:
        out = super().forward(*args, **kwargs)
        guess = self.length_head(out.encoder.pooled_output).squeeze(-1)
        return LengthOutput(**{f.name: getattr(out, f.name) for f in dataclasses.fields(out)}, log_length=guess)


ENCODER_PREFIXES = bert.ENCODER_PREFIXES
OPTIONAL_PREFIXES = bert.OPTIONAL_PREFIXES
normalize_keys = bert.normalize_keys
load_tokenizer = bert.load_tokenizer


def config_from_hf(raw: dict, source: str) -> LengthBertConfig:
    return LengthBertConfig.from_hf_dict(raw, source)


def build(config: LengthBertConfig) -> LengthBertForPreTraining:
    return LengthBertForPreTraining(config)


def expected_shapes(config: LengthBertConfig) -> dict[str, tuple[int, ...]]:
    h = config.hidden_size
    return {**bert.expected_shapes(config), "length_head.weight": (1, h), "length_head.bias": (1,)}


def heads_in(config: LengthBertConfig, state) -> tuple[str, ...]:
    return bert.heads_in(config, state) + (("length",) if "length_head.weight" in state else ())


def architecture(config: LengthBertConfig) -> str:
    return "LengthBertForPreTraining"


# BERT's heads (its model is a BertForPreTraining) and its own
TOY_FAMILY = Family("Length-BERT", ("length_bert",), heads=("mlm", "nsp", "length"), implementation=__name__)


# --------------------------------------------------------------------------------------
# The toy objective: the first word of each text, plus its length, with its own loss
# --------------------------------------------------------------------------------------
def first_word_and_length(model: nn.Module, batch: dict, prediction_cap: int | None = None) -> ObjectiveOutput:
    labels = batch["mlm_labels"]
    inputs = {k: batch[k] for k in ("input_ids", "token_type_ids", "attention_mask") if k in batch}
    out = model(**inputs, mlm_positions=labels != IGNORE, prediction_cap=prediction_cap)
    mlm_loss, correct, count = masked_lm_score(out, labels)
    target = batch["attention_mask"].sum(1).float().log()
    length_loss = nn.functional.mse_loss(out.log_length.float(), target)
    sums = {
        "mlm_correct": float(correct),
        "mlm_count": float(count),
        "mlm_loss_sum": float(mlm_loss.detach()) * float(count),
        "length_loss_sum": float(length_loss.detach()) * len(target),
        "length_count": float(len(target)),
    }
    return ObjectiveOutput(mlm_loss + length_loss, sums, out)


TOY_OBJECTIVE = Objective(
    "first_word_length",
    paired=False,
    nsp=False,
    masker="first_word",
    next_token_labels=False,
    attention_direction="bidirectional",
    description="guess the first word of each text and how long the text is",
    short="first word + length",
    loss="first_word_and_length",
)


@pytest.fixture
def toy_family_and_objective(monkeypatch):
    """The family, the objective, its masker and its loss, registered for this test only."""
    register_family(TOY_FAMILY)
    monkeypatch.setitem(OBJECTIVES, TOY_OBJECTIVE.name, TOY_OBJECTIVE)
    monkeypatch.setitem(maskers.MASKERS, "first_word", FirstWordMasker)
    monkeypatch.setitem(LOSSES, "first_word_and_length", first_word_and_length)
    yield
    unregister_family(TOY_FAMILY)


def test_a_toy_family_and_objective_pretrain_through_the_trainer_and_load_back(
    toy_family_and_objective, tmp_path, vocab_file
):
    cfg = _config(tmp_path, vocab_file, max_steps=2, eval_every=2)
    cfg = dataclasses.replace(
        cfg, model_type="length_bert", data=dataclasses.replace(cfg.data, objective="first_word_length")
    )
    result = run_pretraining(cfg, tmp_path / "run", progress_bar=False)
    assert result.state == "finished" and result.progress.step == 2
    assert math.isfinite(result.last_eval["length_loss"]) and "mlm_acc" in result.last_eval  # its own metric
    logged = [m for m in read_metrics(tmp_path / "run") if "length_loss" in m]
    assert logged, "the trainer logs the objective's own loss"

    folder = tmp_path / "run" / "model"
    raw = json.loads((folder / "config.json").read_text())
    assert raw["model_type"] == "length_bert" and raw["architectures"] == ["LengthBertForPreTraining"]
    config, _ = load_config(folder)
    assert isinstance(config, LengthBertConfig)
    model, _, info = load_pretraining_model(folder)
    assert isinstance(model, LengthBertForPreTraining)
    assert info["family"] == "Length-BERT" and info["heads"] == ("mlm", "length")
    assert "length_head.weight" not in info["missing"]  # the trained head came back
    answer = load_model(folder).fill_mask("the [MASK] sat on the mat .")
    assert answer.masks and answer.masks[0].candidates


def test_the_pretrain_config_names_only_registered_families():
    with pytest.raises(InputError, match="model_type must be one of"):
        PretrainConfig.from_dict({"model_type": "gpt2"})
    assert PretrainConfig.from_dict({}).model_type == "bert"
    with pytest.raises(InputError, match="unknown key.*num_layer;"):  # a typo, refused before the run
        PretrainConfig.from_dict({"model_overrides": {"num_layer": 2}})


def test_a_family_reads_its_own_config_keys_from_model_overrides(toy_family_and_objective, monkeypatch):
    monkeypatch.setitem(FAMILIES, "length_bert", dataclasses.replace(TOY_FAMILY, config_keys=("length_scale",)))
    cfg = PretrainConfig.from_dict(
        {"model_type": "length_bert", "model_overrides": {"length_scale": 2, "num_layers": 1}}
    )
    assert cfg.family_overrides == {"length_scale": 2}
    assert cfg.model_config(100).num_layers == 1


def test_family_for_finds_bert_by_default_and_names_what_it_opens():
    assert family_for({}).name == "BERT"  # old folders and Google's configs may have no model_type
    assert family_for({"model_type": "bert"}) is FAMILIES["bert"]
    with pytest.raises(CheckpointError, match="model_type is 'gpt2'; BERT Lab opens 'bert'"):
        family_for({"model_type": "gpt2"}, "x/config.json")


def test_a_folder_without_a_masked_lm_head_loads_and_fill_mask_says_why_not(tmp_path, tiny_checkpoint):
    from safetensors.torch import load_file, save_file

    folder = tmp_path / "encoder-only"
    folder.mkdir()
    for f in tiny_checkpoint.iterdir():
        if f.is_file():
            (folder / f.name).write_bytes(f.read_bytes())
    state = {k: v for k, v in load_file(folder / "model.safetensors").items() if not k.startswith("cls.")}
    save_file(state, folder / "model.safetensors")
    lm = load_model(folder)
    assert lm.heads == () and not lm.has_mlm and not lm.has_nsp
    assert lm.inspect("the cat sat .").attentions.shape[0] == lm.config.num_layers  # the encoder still answers
    with pytest.raises(InputError, match="needs a masked-LM head"):
        lm.fill_mask("the [MASK] sat .")
