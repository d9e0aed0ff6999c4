"""Seeing inside a model: why it answered, what each layer knows, which heads matter (issue #23).

Every function takes any loaded model: a `LoadedModel` (`bertlab.inference.load_model`: the
shipped model, a finished run, a Hub BERT) or a `FinetunedModel` (`bertlab.finetune.predict.load_finetuned`),
and runs offline on the CPU. Three limits, each refused with an InputError that says so: attribution
and head importance take gradients through the encoder, so not a feature-based (frozen) fine-tuned
model; a target fits its model (a [MASK] or NSP needs a pretrained one, a label a fine-tuned one);
and `compare_models` compares the [MASK] answers of two pretrained models. Bad arguments (a count
that is not a whole number, a str where a list is wanted) raise InputError too. Modules, lowest first:

- targets: the model and the prediction being explained (a [MASK] answer, P(IsNext), P(in order), a label, a span);
- attribution: gradient x input and integrated gradients (Captum), with a convergence check;
- rollout: attention rollout and attention flow (Abnar & Zuidema 2020);
- contextual: one word in several sentences, per layer: PCA, self-similarity, anisotropy (Ethayarajh 2019);
- probing: a linear probe per layer and the centre of gravity (Tenney et al. 2019);
- heads: head importance and pruning curves (Michel et al. 2019);
- compare: two models on one sentence;
- replaced: which tokens an ELECTRA discriminator calls replaced, in a typed or a generator-corrupted sentence;
- saved: results kept beside the model; args (torch-free) and cli: `bertlab interpret probe|heads`,
  which also runs as a job (`bertlab jobs submit interpret ...`).

Each name below loads its module on first use, so `saved` and `args` import without torch.

Never imports streamlit.
"""

# name -> the module that owns it. Loaded on first use, so that a torch-free submodule (saved,
# args) imports without torch: the job registry checks `bertlab interpret` arguments with `args`.
_OWNERS = {
    "Attribution": "attribution",
    "attribute": "attribution",
    "Comparison": "compare",
    "compare_models": "compare",
    "ContextualWord": "contextual",
    "contextual_word": "contextual",
    "HeadImportance": "heads",
    "HeadStudy": "heads",
    "LabelledSentences": "heads",
    "MaskedSentences": "heads",
    "PruningCurve": "heads",
    "head_importance": "heads",
    "pruning_curve": "heads",
    "study_heads": "heads",
    "ProbeConfig": "probing",
    "ProbeResult": "probing",
    "probe_layers": "probing",
    "AttentionMaps": "rollout",
    "attention_flow": "rollout",
    "attention_maps": "rollout",
    "attention_rollout": "rollout",
    "ReplacedTokens": "replaced",
    "corrupt_and_detect": "replaced",
    "detect_replaced": "replaced",
    "AnswerSpan": "targets",
    "InOrder": "targets",
    "IsNext": "targets",
    "MaskedWord": "targets",
    "TaskLabel": "targets",
    "as_subject": "targets",
    "load_subject": "targets",
}

__all__ = [
    "AnswerSpan",
    "AttentionMaps",
    "Attribution",
    "Comparison",
    "ContextualWord",
    "HeadImportance",
    "HeadStudy",
    "InOrder",
    "IsNext",
    "LabelledSentences",
    "MaskedSentences",
    "MaskedWord",
    "ProbeConfig",
    "ProbeResult",
    "PruningCurve",
    "ReplacedTokens",
    "TaskLabel",
    "as_subject",
    "attention_flow",
    "attention_maps",
    "attention_rollout",
    "attribute",
    "compare_models",
    "contextual_word",
    "corrupt_and_detect",
    "detect_replaced",
    "head_importance",
    "load_subject",
    "probe_layers",
    "pruning_curve",
    "study_heads",
]


def __getattr__(name):
    if name in _OWNERS:
        import importlib  # deferred with the module it loads: torch, kept out of `interpret.args` and `saved`

        return getattr(importlib.import_module(f"bertlab.interpret.{_OWNERS[name]}"), name)
    raise AttributeError(f"module 'bertlab.interpret' has no attribute {name!r}")
