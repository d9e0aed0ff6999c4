"""bertlab/config.py: the model config, its presets and the checks on fields read from files."""

from __future__ import annotations

import dataclasses

import pytest

from bertlab.config import PRESETS, BertConfig, coerce_field, dataclass_from_dict, preset
from bertlab.errors import CheckpointError, InputError


def test_presets_follow_the_paper_and_take_overrides():
    base = preset("base")
    assert (base.num_layers, base.hidden_size, base.num_heads) == (12, 768, 12)
    assert base.intermediate_size == 4 * base.hidden_size and base.head_size == 64
    assert preset("tiny", vocab_size=100).vocab_size == 100
    assert {"tiny", "mini", "base", "large"} <= set(PRESETS)
    with pytest.raises((InputError, KeyError, ValueError)):
        preset("enormous")


def test_hugging_face_config_round_trip():
    cfg = preset("mini", vocab_size=321, use_nsp_head=False)
    assert BertConfig.from_hf_dict(cfg.to_hf_dict()) == cfg
    with pytest.raises(CheckpointError, match="missing key"):
        BertConfig.from_hf_dict({"hidden_size": 8})
    with pytest.raises(CheckpointError, match="hidden_act"):
        BertConfig.from_hf_dict({**cfg.to_hf_dict(), "hidden_act": "relu"})


def test_fields_from_files_are_coerced_or_refused():
    assert coerce_field("3", "int", "k") == 3 and coerce_field("0.5", "float", "k") == 0.5
    assert coerce_field("true", "bool", "k") is True
    with pytest.raises(InputError):
        coerce_field("three", "int", "train.max_steps")

    @dataclasses.dataclass(frozen=True)
    class Section:
        steps: int = 1
        rate: float = 0.1

    assert dataclass_from_dict(Section, {"steps": "5"}, "train") == Section(steps=5)
    with pytest.raises(InputError, match="unknown"):
        dataclass_from_dict(Section, {"stpes": 5}, "train")
