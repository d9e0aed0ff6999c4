"""Seeing inside a model: why it answered, what each layer knows, which heads matter (issue #23).

Every function takes any loaded model: a `LoadedModel` (`bertlab.inference.load_model`: the
shipped model, a finished run, a Hub BERT) or a `FinetunedModel` (`bertlab.finetune.predict.load_finetuned`),
and runs offline on the CPU. Modules, lowest first:

- targets: the model and the prediction being explained (a [MASK] answer, P(IsNext), a label, a span);
- attribution: gradient x input and integrated gradients (Captum), with a convergence check;
- rollout: attention rollout and attention flow (Abnar & Zuidema 2020);
- contextual: one word in several sentences, per layer: PCA, self-similarity, anisotropy (Ethayarajh 2019);
- probing: a linear probe per layer and the centre of gravity (Tenney et al. 2019);
- heads: head importance and pruning curves (Michel et al. 2019);
- compare: two models on one sentence;
- saved: results kept beside the model; cli: `python -m bertlab.interpret probe|heads`.

Never imports streamlit.
"""

from bertlab.interpret.attribution import Attribution, attribute
from bertlab.interpret.compare import Comparison, compare_models
from bertlab.interpret.contextual import ContextualWord, contextual_word
from bertlab.interpret.heads import (
    HeadImportance,
    HeadStudy,
    LabelledSentences,
    MaskedSentences,
    PruningCurve,
    head_importance,
    pruning_curve,
    study_heads,
)
from bertlab.interpret.probing import ProbeConfig, ProbeResult, probe_layers
from bertlab.interpret.rollout import AttentionMaps, attention_flow, attention_maps, attention_rollout
from bertlab.interpret.targets import AnswerSpan, IsNext, MaskedWord, TaskLabel, as_subject, load_subject

__all__ = [
    "AnswerSpan",
    "AttentionMaps",
    "Attribution",
    "Comparison",
    "ContextualWord",
    "HeadImportance",
    "HeadStudy",
    "IsNext",
    "LabelledSentences",
    "MaskedSentences",
    "MaskedWord",
    "ProbeConfig",
    "ProbeResult",
    "PruningCurve",
    "TaskLabel",
    "as_subject",
    "attention_flow",
    "attention_maps",
    "attention_rollout",
    "attribute",
    "compare_models",
    "contextual_word",
    "head_importance",
    "load_subject",
    "probe_layers",
    "pruning_curve",
    "study_heads",
]
