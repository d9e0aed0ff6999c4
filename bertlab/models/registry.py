"""Model families: one `Family` entry per architecture, found from `config.json`'s `model_type`.

A family (BERT today) is one module under `bertlab.models` plus one entry here. The entry is
torch-free: what the family is called, which `model_type` values it answers to, which heads a
folder of it can hold, and the module that implements it (`implementation`), imported only when a
model is built or loaded. That module provides the `FamilyImplementation` functions: parse the
config, build the model, map Hugging Face's weight names onto ours, say which heads a state dict
holds and which class name to save under. This is the shape of transformers' auto mapping (a
`model_type` -> module name table, modules imported lazily), so the catalog, the hub list and the
jobs can ask "is this a model we open?" without importing torch.

What `build` returns is what the inference API, the pages and the trainer use, so every family's
pretraining model keeps BERT's surface: `forward(input_ids, token_type_ids, attention_mask,
mlm_positions, head_mask, output_attentions, output_hidden_states, prediction_cap)` returning a
`bertlab.model.PreTrainingOutput` (or a subclass with the family's own head outputs), `.bert` the
encoder (called as `BertModel` is, returning an `EncoderOutput`; a property where Hugging Face names
it otherwise, so the weights keep Hugging Face's names), `.config` (num_layers, num_heads,
hidden_size, vocab_size, max_position_embeddings), `.heads`, `layer_logits(hidden)`,
`num_parameters()` and `set_dropout(p)`. The tokenizer it loads keeps `bertlab.tokenizer.BertTokenizer`'s.

Fine-tuning (bertlab.finetune) reads three more things from a family: `build_encoder(config)`, the
encoder alone, which a task model holds under the family's name (`ENCODER_PREFIXES[0]`: `albert.`,
`electra.`, ...), `task_config(config)`, the config a fine-tuned model is built and saved with (an
ELECTRA pair's discriminator; a DistilBERT as the BERT its layers are), and on the `Family` entry the
transformers class-name prefix its fine-tuned folders save under (`AlbertForSequenceClassification`),
what its sentence classifier reads (BERT's and ALBERT's pooler, or ELECTRA's and RoBERTa's dense
head on the first token) and which half of a pair folder fine-tunes.

The heads a family can hold, by name: "mlm" (masked LM), "nsp" (next sentence prediction), "sop"
(sentence order), "rtd" (replaced-token detection), "sbo" (SpanBERT's span boundary), "lm" (next token). Pages read these names to
say what a model lacks.

Imports bertlab.errors only; no torch.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

from bertlab.errors import CheckpointError

HEAD_TITLES = {
    "mlm": "masked LM",
    "nsp": "next sentence prediction",
    "sop": "sentence order prediction",
    "rtd": "replaced-token detection",
    "sbo": "span boundary (SpanBERT)",
}
# where the app shows the answers of a head that is not a masked LM, for messages that offer them
HEAD_VIEWS = {
    "nsp": "the Next sentence page shows its P(IsNext)",
    "sop": "the Next sentence page shows its P(in order)",
    "rtd": "the Fill-mask page shows its P(replaced) for every token",
}


def heads_in_words(heads: Sequence[str], offer: bool = False) -> str:
    """The heads a model has, in words ("masked LM, sentence order prediction"), for messages; `offer`
    adds where the app shows each one's answers ("replaced-token detection (the Fill-mask page shows
    its P(replaced) for every token)")."""
    if not heads:
        return "no pretraining head (a fine-tuned classifier or an encoder saved without its pretraining heads)"
    return ", ".join(
        HEAD_TITLES.get(h, h) + (f" ({HEAD_VIEWS[h]})" if offer and h in HEAD_VIEWS else "") for h in heads
    )


class FamilyImplementation(Protocol):
    """What a family's module provides (torch-side; see bertlab.models.bert)."""

    def config_from_hf(self, raw: dict, source: str) -> Any: ...

    def build(self, config: Any) -> Any: ...

    def normalize_keys(self, state: dict) -> dict: ...

    def expected_shapes(self, config: Any) -> dict[str, tuple[int, ...]]: ...

    def heads_in(self, config: Any, state: Mapping[str, Any]) -> tuple[str, ...]: ...

    def architecture(self, config: Any) -> str: ...

    def load_tokenizer(self, directory: Any, config: Any) -> Any: ...

    def build_encoder(self, config: Any) -> Any: ...

    def task_config(self, config: Any) -> Any: ...

    ENCODER_PREFIXES: tuple[str, ...]  # weights a folder of the family must hold
    OPTIONAL_PREFIXES: tuple[str, ...]  # ... except these (e.g. BERT's pooler, which only NSP needs)


@dataclass(frozen=True)
class Family:
    """One model family: its names and where its implementation lives."""

    name: str  # what the pages call it, e.g. "BERT"
    model_types: tuple[str, ...]  # config.json `model_type` values it opens
    heads: tuple[str, ...]  # the heads a folder of this family can hold (HEAD_TITLES' keys)
    implementation: str  # module path, imported on first use
    # config.json keys its config reads beyond BERT's (e.g. ALBERT's embedding_size): a pretraining
    # run's model_overrides may set them, and any other unknown key is a typo, refused before a run starts
    config_keys: tuple[str, ...] = ()
    # fine-tuning: its task models save as `{task_prefix}ForSequenceClassification` (ForTokenClassification,
    # ForQuestionAnswering), as transformers names them
    task_prefix: str = "Bert"
    # what a sentence classifier reads (bertlab.finetune.models.SEQUENCE_HEADS): "pooler" (BERT, ALBERT: the
    # pooler's tanh(dense([CLS])), dropout, `classifier`), "dense_gelu" (ELECTRA) or "dense_tanh" (RoBERTa):
    # `classifier.dense` and `classifier.out_proj` on the first token, as transformers' ElectraClassificationHead
    # and RobertaClassificationHead
    sequence_head: str = "pooler"
    finetune_half: str = ""  # the half of a pair folder that fine-tunes (ELECTRA's discriminator, as in the paper)

    def load(self) -> FamilyImplementation:
        """The implementing module (imported here, by name, so that this registry stays torch-free)."""
        module: ModuleType = importlib.import_module(self.implementation)
        return module  # type: ignore[return-value]


FAMILIES: dict[str, Family] = {}


def register_family(family: Family) -> Family:
    """Add a family under each of its `model_types` (a later entry for a type replaces an earlier one)."""
    for model_type in family.model_types:
        FAMILIES[model_type] = family
    return family


def unregister_family(family: Family) -> None:
    """Remove a family's entries (tests that register a toy family clean up with this)."""
    for model_type in family.model_types:
        if FAMILIES.get(model_type) is family:
            del FAMILIES[model_type]


def build_model(config: Any) -> Any:
    """A freshly initialised model of `config`'s family (found from its `model_type`)."""
    return family_of(config).load().build(config)


def family_of(config: Any) -> Family:
    """The family of a config object (BertConfig or a subclass), from its `model_type`."""
    return family_for({"model_type": config.model_type}, type(config).__name__)


def known_model_types() -> tuple[str, ...]:
    return tuple(FAMILIES)


def model_type_of(raw: Mapping[str, Any]) -> str:
    """config.json's `model_type`; folders written before it was saved (or by old BERT tools) are BERT."""
    value = raw.get("model_type", "bert")
    return value if isinstance(value, str) else repr(value)


def family_for(raw: Mapping[str, Any], source: str = "config.json") -> Family:
    """The family that opens a folder with this config.json content.

    Raises:
        CheckpointError: no registered family has that `model_type`.
    """
    model_type = model_type_of(raw)
    try:
        return FAMILIES[model_type]
    except KeyError:
        raise CheckpointError(
            f"{source}: model_type is {model_type!r}; BERT Lab opens {', '.join(repr(t) for t in FAMILIES)}"
        ) from None


register_family(Family("BERT", ("bert",), heads=("mlm", "nsp", "sbo"), implementation="bertlab.models.bert"))
register_family(
    Family(
        "ELECTRA",
        ("electra",),
        heads=("mlm", "rtd"),
        implementation="bertlab.models.electra",
        config_keys=("embedding_size", "generator_size"),
        task_prefix="Electra",
        sequence_head="dense_gelu",
        finetune_half="discriminator",
    )
)
register_family(
    Family(
        "RoBERTa",
        ("roberta",),
        heads=("mlm",),
        implementation="bertlab.models.roberta",
        task_prefix="Roberta",
        sequence_head="dense_tanh",
    )
)
register_family(
    Family(
        "ALBERT",
        ("albert",),
        heads=("mlm", "sop"),
        implementation="bertlab.models.albert",
        config_keys=("embedding_size", "parameter_sharing"),
        task_prefix="Albert",
    )
)
# a DistilBERT fine-tunes as the BERT its layers are (task_config), so its fine-tuned folders are BERT's
register_family(Family("DistilBERT", ("distilbert",), heads=("mlm",), implementation="bertlab.models.distilbert"))
# RoBERTa's layout with sliding-window attention and global tokens with their own projections
register_family(
    Family(
        "Longformer",
        ("longformer",),
        heads=("mlm",),
        implementation="bertlab.models.longformer",
        task_prefix="Longformer",
        sequence_head="dense_tanh",
    )
)
# BERT's layout; original_full or block_sparse attention (bertlab.models.bigbird says how far it matches)
register_family(
    Family(
        "BigBird",
        ("big_bird",),
        heads=("mlm", "nsp"),
        implementation="bertlab.models.bigbird",
        task_prefix="BigBird",
        sequence_head="dense_gelu",
    )
)
