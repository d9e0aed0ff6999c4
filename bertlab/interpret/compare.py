"""Compare two models on one sentence: their fill-mask answers, attributions and attention side by side.

Owns `compare_models` and its result `Comparison`. Each model reads the sentence with its own
tokenizer, so their tokens may differ; each side is explained on its own top answer.

Imports bertlab.errors, bertlab.inference and the interpret modules it puts side by side.
"""

from __future__ import annotations

from dataclasses import dataclass

from bertlab.errors import InputError
from bertlab.inference import FillMaskResult, LoadedModel
from bertlab.interpret.attribution import Attribution, attribute
from bertlab.interpret.rollout import AttentionMaps, attention_maps
from bertlab.interpret.targets import MaskedWord


@dataclass
class ModelView:
    """One model's reading of the sentence."""

    name: str
    fill_mask: FillMaskResult
    attribution: Attribution
    attention: AttentionMaps


@dataclass
class Comparison:
    """Two models on one sentence; `agree` when their top answers for the first [MASK] are the same word."""

    text: str
    left: ModelView
    right: ModelView

    @property
    def agree(self) -> bool:
        a, b = self.left.fill_mask.masks[0].candidates[0], self.right.fill_mask.masks[0].candidates[0]
        return a.word.casefold() == b.word.casefold()


def _view(lm: LoadedModel, name: str, text: str, top_k: int, steps: int) -> ModelView:
    fm = lm.fill_mask(text, top_k=top_k, joint=False)
    att = attribute(lm, text, target=MaskedWord(), steps=steps)
    return ModelView(name, fm, att, attention_maps(lm, text, flow=False))


def compare_models(
    left: LoadedModel,
    right: LoadedModel,
    text: str,
    names: tuple[str, str] = ("model A", "model B"),
    top_k: int = 5,
    steps: int = 32,
) -> Comparison:
    """Both models' fill-mask answers, integrated-gradients attribution of their top answer at the
    first [MASK], and attention rollout, for one sentence with at least one [MASK]."""
    for side, model in zip(names, (left, right), strict=True):
        if not isinstance(model, LoadedModel):
            raise InputError(
                f"{side} is a {type(model).__name__}; compare_models compares the [MASK] answers of two pretrained "
                "models: load each with bertlab.inference.load_model"
            )
    if not isinstance(text, str) or "[mask]" not in text.lower():
        raise InputError("write a sentence with a [MASK] so both models have something to answer")
    return Comparison(text, _view(left, names[0], text, top_k, steps), _view(right, names[1], text, top_k, steps))
