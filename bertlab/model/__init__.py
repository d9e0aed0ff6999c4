"""The BERT model: the encoder (bertlab.model.encoder) and its pretraining heads (bertlab.model.pretraining),
named as Google's and Hugging Face's checkpoints name them, key for key. Everything a caller needs is
importable from here: `from bertlab.model import BertForPreTraining, BertModel`.

The model takes tensors and returns typed dataclasses; it computes no loss (each objective owns its
loss, bertlab.losses), and each family's loading and naming rules live in bertlab.models.
"""

from bertlab.model.encoder import (
    BertAttention,
    BertEmbeddings,
    BertEncoder,
    BertIntermediate,
    BertLayer,
    BertModel,
    BertOutput,
    BertPooler,
    BertSelfAttention,
    BertSelfOutput,
    EncoderOutput,
)
from bertlab.model.pretraining import (
    TIED_KEYS,
    BertForPreTraining,
    BertLMPredictionHead,
    BertPredictionHeadTransform,
    BertPreTrainingHeads,
    BertSpanBoundaryHead,
    PreTrainingOutput,
    init_weights,
)

__all__ = [
    "TIED_KEYS",
    "BertAttention",
    "BertEmbeddings",
    "BertEncoder",
    "BertForPreTraining",
    "BertIntermediate",
    "BertLMPredictionHead",
    "BertLayer",
    "BertModel",
    "BertOutput",
    "BertPooler",
    "BertPreTrainingHeads",
    "BertPredictionHeadTransform",
    "BertSelfAttention",
    "BertSelfOutput",
    "BertSpanBoundaryHead",
    "EncoderOutput",
    "PreTrainingOutput",
    "init_weights",
]
