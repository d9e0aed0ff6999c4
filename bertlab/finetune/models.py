"""An encoder of any family with a task output layer (paper, Figure 4), named as Hugging Face names them.

`BertForSequenceClassification` (the encoder + `classifier.*`; num_labels=1 is regression with MSE),
`BertForTokenClassification` (dropout, then Linear on every token) and `BertForQuestionAnswering`
(`qa_outputs.*`: start and end logits per token). The encoder is the family's (bertlab.models.registry:
`build_encoder`), held under the family's name, so the weights are transformers' key for key: `bert.`
for BERT, `albert.`, `electra.` (a discriminator) and `roberta.`; the model saves as
`{family.task_prefix}ForSequenceClassification` and so on (`task_architecture`). A sentence classifier
reads what the family's transformers class reads (`Family.sequence_head`): BERT and ALBERT the pooler
(dropout, then `classifier`), ELECTRA and RoBERTa a dense head on the first token (`classifier.dense`,
GELU or tanh, `classifier.out_proj`: `ClassificationHead`). With the default head these are the same
computation as transformers' classes, so a saved model opens there unchanged.

One `HeadConfig` also covers the paper's other set-ups as fields, not forks:
- feature-based (Table 7): the encoder is frozen (and kept in eval mode); the task layer reads a
  chosen layer, the sum or concatenation of the last four, or a learned scalar mix of all layers;
  tagging then runs a two-layer BiLSTM, classification a small MLP on the [CLS] features;
- "+ BiLSTM" (Table 5): a randomly initialised BiLSTM between the encoder and the output layer
  while fine-tuning everything.
These extra modules (`layer_features.*`, `lstm.*`, `mlp.*`) are ours; transformers would ignore them.

Imports torch, bertlab.config, bertlab.model, bertlab.models.registry, bertlab.errors.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from bertlab.config import BertConfig
from bertlab.errors import InputError
from bertlab.finetune.args import check_features
from bertlab.model import EncoderOutput, init_weights
from bertlab.models.registry import family_of

log = logging.getLogger(__name__)

MODES = ("finetune", "feature")
# the transformers class of each task shape, after the family's prefix (Bert, Albert, Electra, Roberta)
TASK_SUFFIXES = {
    "single": "ForSequenceClassification",
    "pair": "ForSequenceClassification",
    "regression": "ForSequenceClassification",
    "tagging": "ForTokenClassification",
    "qa": "ForQuestionAnswering",
}
# what a sentence classifier's dense head applies between its two Linear layers (Family.sequence_head)
SEQUENCE_HEADS = {"dense_gelu": F.gelu, "dense_tanh": torch.tanh}


def task_architecture(config: BertConfig, shape: str) -> str:
    """The transformers class a task model of `config`'s family saves as: 'ElectraForSequenceClassification'."""
    return family_of(config).task_prefix + TASK_SUFFIXES[shape]


@dataclass(frozen=True)
class HeadConfig:
    """The output layer and what feeds it; saved in config.json so the model loads back as trained."""

    shape: str  # single | pair | regression | tagging | qa
    num_labels: int  # classes; 1 = regression; 2 for QA (start, end)
    mode: str = "finetune"  # finetune: train all weights; feature: frozen encoder, train the task layers only
    features: str = "last"  # which encoder states feed the task layer: FEATURES_HELP
    bilstm: bool = False  # a BiLSTM between encoder and output layer (the paper's "+ BiLSTM" ablation)
    lstm_hidden: int = 0  # BiLSTM width per direction; 0 = the encoder's hidden size (as the paper's 768)
    lstm_layers: int = 2  # the paper's feature-based NER uses a two-layer BiLSTM
    classifier_dropout: float | None = None  # None = the encoder's hidden dropout (BERT's 0.1)

    def __post_init__(self):
        if self.mode not in MODES:
            raise InputError(f"mode must be one of {MODES}, not {self.mode!r}")
        if self.shape not in TASK_SUFFIXES:
            raise InputError(f"task shape must be one of {tuple(TASK_SUFFIXES)}, not {self.shape!r}")
        check_features(self.features)
        if self.num_labels < 1:
            raise InputError("a task needs at least one label")

    @property
    def use_bilstm(self) -> bool:
        """A BiLSTM when asked for, and always for feature-based tagging (the paper's set-up)."""
        return self.bilstm or (self.mode == "feature" and self.shape == "tagging")

    @property
    def is_hf_equivalent(self) -> bool:
        """True when transformers' own class computes exactly what this model does."""
        return self.mode == "finetune" and self.features == "last" and not self.bilstm


@dataclass
class TaskOutput:
    """What a task model returns.

    Attributes:
        logits: (B, C) for sequence tasks (C = 1 for regression), (B, T, C) for tagging,
            (B, T, 2) for QA (start, end).
        loss: scalar float, or None without labels.
        start_logits / end_logits: (B, T) for QA, else None.
    """

    logits: torch.Tensor
    loss: torch.Tensor | None = None
    start_logits: torch.Tensor | None = None
    end_logits: torch.Tensor | None = None


class LayerFeatures(nn.Module):
    """Pick or combine encoder layers: (L+1) x (B, T, H) -> (B, T, F)."""

    def __init__(self, spec: str, num_layers: int, hidden_size: int):
        super().__init__()
        self.spec = spec
        self.num_layers = num_layers
        self.out_size = hidden_size
        if spec.startswith("layer:"):
            n = int(spec.split(":")[1])
            index = n if n >= 0 else num_layers + 1 + n
            if not 0 <= index <= num_layers:
                raise InputError(f"features {spec}: this encoder has layers 0 (embeddings) to {num_layers}")
            self.index = index
        self.last_k = min(4, num_layers)
        if spec in ("sum4", "wsum4", "cat4") and num_layers < 4:
            log.warning("features %s: the encoder has only %d layers; using all of them", spec, num_layers)
        if spec == "cat4":
            self.out_size = hidden_size * self.last_k
        if spec in ("mix", "wsum4"):
            # ELMo's scalar mix: gamma * sum_j softmax(w)_j h_j over the embeddings and every layer
            # (mix) or over the last four layers (wsum4, the paper's "weighted sum last four hidden")
            self.weights = nn.Parameter(torch.zeros(num_layers + 1 if spec == "mix" else self.last_k))
            self.gamma = nn.Parameter(torch.ones(()))

    @property
    def needs_all_layers(self) -> bool:
        return self.spec != "last"

    def forward(self, enc: EncoderOutput) -> torch.Tensor:
        if self.spec == "last":
            return enc.last_hidden_state
        states = enc.hidden_states  # L+1 tensors (B, T, H)
        if self.spec.startswith("layer:"):
            return states[self.index]
        if self.spec == "sum4":
            return torch.stack(states[-self.last_k :]).sum(0)
        if self.spec == "cat4":
            return torch.cat(states[-self.last_k :], dim=-1)  # (B, T, k*H)
        mixed = states if self.spec == "mix" else states[-self.last_k :]
        w = self.weights.softmax(0).to(states[0].dtype)
        return self.gamma * (w[:, None, None, None] * torch.stack(mixed)).sum(0)  # (B, T, H)


class ClassificationHead(nn.Module):
    """transformers' ElectraClassificationHead (GELU) and RobertaClassificationHead (tanh): the first
    token's features (B, F) -> dropout, dense, activation, dropout, out_proj -> (B, C)."""

    def __init__(self, size: int, num_labels: int, activation: str, dropout: float):
        super().__init__()
        self.dense = nn.Linear(size, size)
        self.out_proj = nn.Linear(size, num_labels)
        self.dropout = nn.Dropout(dropout)
        self.activation = SEQUENCE_HEADS[activation]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out_proj(self.dropout(self.activation(self.dense(self.dropout(x)))))  # (B, C)


class _BertTaskModel(nn.Module):
    """The family's encoder, the feature choice, an optional BiLSTM; subclasses add the output layer."""

    def __init__(self, config: BertConfig, head: HeadConfig):
        super().__init__()
        self.config = config
        self.head_config = head
        self.family = family_of(config)
        implementation = self.family.load()
        # the encoder's attribute is the family's name, so its weights keep transformers' (`albert.encoder...`)
        self.encoder_name = implementation.ENCODER_PREFIXES[0].rstrip(".")
        self.add_module(self.encoder_name, implementation.build_encoder(config))
        self.layer_features = LayerFeatures(head.features, config.num_layers, config.hidden_size)
        size = self.layer_features.out_size
        self.lstm = None
        if head.use_bilstm:
            hidden = head.lstm_hidden or config.hidden_size
            self.lstm = nn.LSTM(
                size,
                hidden,
                num_layers=head.lstm_layers,
                bidirectional=True,
                batch_first=True,
                dropout=config.hidden_dropout if head.lstm_layers > 1 else 0.0,
            )
            size = 2 * hidden
        self.task_input_size = size
        p = head.classifier_dropout if head.classifier_dropout is not None else config.hidden_dropout
        self.dropout = nn.Dropout(p)

    @property
    def bert(self) -> nn.Module:
        """The encoder, under the name every family's model answers to (BertModel's surface)."""
        try:
            return self._modules[self.encoder_name]
        except KeyError:  # asked before __init__ added it (nn.Module.add_module checks the name is free)
            raise AttributeError("bert") from None

    @property
    def frozen(self) -> bool:
        return self.head_config.mode == "feature"

    def _finish_init(self, uses_pooler: bool = False) -> None:
        init_weights(self, self.config.initializer_range)  # LSTMs keep PyTorch's own init
        if self.frozen:
            self.bert.requires_grad_(False)
            self.bert.eval()
            return
        # weights that get no gradient must not be trainable: DDP (find_unused_parameters=False)
        # stops on them, and AdamW's weight decay would shrink them for nothing
        if not uses_pooler and self.bert.pooler is not None:  # RoBERTa's encoder has none
            self.bert.pooler.requires_grad_(False)
        if self.head_config.features.startswith("layer:"):
            for layer in self.bert.encoder.layer[self.layer_features.index :]:
                layer.requires_grad_(False)

    def train(self, mode: bool = True) -> _BertTaskModel:
        super().train(mode)
        if self.frozen:
            self.bert.eval()  # a frozen encoder gives the same features every time: no dropout
        return self

    def encode(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        cls_only: bool = False,
    ) -> tuple[EncoderOutput, torch.Tensor]:
        """Encoder output and the task features (B, T, F) (after the BiLSTM when there is one).

        cls_only: the caller reads only [CLS] from the last layer, so that layer runs only there
        (features (B, 1, F)); ignored where other positions are needed (BiLSTM, earlier layers)."""
        grad = torch.enable_grad() if not self.frozen else torch.no_grad()
        positions = None
        if (
            cls_only
            and self.lstm is None
            and not self.layer_features.needs_all_layers
            and self.config.attention_direction == "bidirectional"
        ):
            positions = torch.zeros(input_ids.shape[0], 1, dtype=torch.long, device=input_ids.device)
        with grad:
            enc = self.bert(
                input_ids,
                token_type_ids,
                attention_mask,
                output_hidden_states=self.layer_features.needs_all_layers,
                last_layer_positions=positions,
            )
        feats = self.layer_features(enc)
        if self.lstm is not None:
            feats = self._run_lstm(feats, attention_mask)
        return enc, feats

    @staticmethod
    def _last_positions(attention_mask: torch.Tensor | None, feats: torch.Tensor) -> torch.Tensor:
        """(B,) index of each row's last real token."""
        if attention_mask is None:
            return torch.full((feats.shape[0],), feats.shape[1] - 1, dtype=torch.long, device=feats.device)
        return (attention_mask.sum(1) - 1).long()

    def _run_lstm(self, x: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
        B, T, _ = x.shape
        lengths = attention_mask.sum(1) if attention_mask is not None else torch.full((B,), T, device=x.device)
        # packing keeps padding out of the backward direction's state
        packed = nn.utils.rnn.pack_padded_sequence(
            x.float(), lengths.cpu().clamp(min=1), batch_first=True, enforce_sorted=False
        )
        with torch.autocast(x.device.type, enabled=False):  # fp32 as given: cuDNN's autocast would take fp16
            out, _ = self.lstm(packed)
        out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=T)  # (B, T, 2h)
        return out.to(x.dtype)

    def num_parameters(self, trainable_only: bool = False) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad or not trainable_only)


class BertForSequenceClassification(_BertTaskModel):
    """A class (or a score, num_labels=1) per sentence or sentence pair."""

    def __init__(self, config: BertConfig, head: HeadConfig):
        super().__init__(config, head)
        self.mlp = None
        size = self.task_input_size
        if head.mode == "feature" and not head.use_bilstm:
            self.mlp = nn.Sequential(nn.Linear(size, config.hidden_size), nn.Tanh())
            size = config.hidden_size
        family_head = head.features == "last" and head.mode == "finetune" and not head.use_bilstm
        self.reads_pooler = family_head and self.family.sequence_head == "pooler"
        self.classifier: nn.Module = nn.Linear(size, head.num_labels)
        if family_head and not self.reads_pooler:  # ELECTRA's, RoBERTa's: a dense head with its own dropout
            self.classifier = ClassificationHead(size, head.num_labels, self.family.sequence_head, self.dropout.p)
        self._finish_init(uses_pooler=self.reads_pooler)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
    ) -> TaskOutput:
        """labels: (B,) long class ids, or (B,) float targets for regression."""
        enc, feats = self.encode(input_ids, token_type_ids, attention_mask, cls_only=True)
        h = self.head_config
        if self.lstm is not None:
            # forward direction at the last real token + backward direction at [CLS]
            half = feats.shape[-1] // 2
            last = self._last_positions(attention_mask, feats)
            rows = torch.arange(feats.shape[0], device=feats.device)
            x = torch.cat([feats[rows, last, :half], feats[:, 0, half:]], dim=-1)
        elif self.config.attention_direction != "bidirectional":
            # a left-to-right model has seen the whole input only at its last real token ([CLS] at
            # position 0 sees only itself): read there, as GPT-style classifiers do
            last = self._last_positions(attention_mask, feats)
            rows = torch.arange(feats.shape[0], device=feats.device)
            if self.reads_pooler:
                x = torch.tanh(self.bert.pooler.dense(enc.last_hidden_state[rows, last]))
            else:
                x = feats[rows, last]
        elif self.reads_pooler:
            x = enc.pooled_output  # (B, H), as BERT and transformers do
        else:
            x = feats[:, 0]  # the [CLS] features (B, F)
        if self.mlp is not None:
            x = self.mlp(x)
        if isinstance(self.classifier, ClassificationHead):
            logits = self.classifier(x)  # (B, C); the head applies its own dropout
        else:
            logits = self.classifier(self.dropout(x))  # (B, C)
        loss = None
        if labels is not None:
            if h.num_labels == 1:
                loss = F.mse_loss(logits.squeeze(-1).float(), labels.float())
            else:
                loss = F.cross_entropy(logits.float(), labels)
        return TaskOutput(logits=logits, loss=loss)


class BertForTokenClassification(_BertTaskModel):
    """A class per token; labels carry -100 on tokens that are not scored (specials, later pieces)."""

    def __init__(self, config: BertConfig, head: HeadConfig):
        super().__init__(config, head)
        self.classifier = nn.Linear(self.task_input_size, head.num_labels)
        self._finish_init()

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
    ) -> TaskOutput:
        """labels: (B, T) long, -100 where no label."""
        _, feats = self.encode(input_ids, token_type_ids, attention_mask)
        logits = self.classifier(self.dropout(feats))  # (B, T, C)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=-100)
        return TaskOutput(logits=logits, loss=loss)


class BertForQuestionAnswering(_BertTaskModel):
    """Start and end scores for every token; the answer is the best span start <= end."""

    def __init__(self, config: BertConfig, head: HeadConfig):
        super().__init__(config, head)
        self.qa_outputs = nn.Linear(self.task_input_size, 2)
        self._finish_init()

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        start_positions: torch.Tensor | None = None,
        end_positions: torch.Tensor | None = None,
    ) -> TaskOutput:
        """start_positions / end_positions: (B,) token indices of the answer (0 = [CLS] when the
        answer is not in this window)."""
        _, feats = self.encode(input_ids, token_type_ids, attention_mask)
        logits = self.qa_outputs(feats)  # (B, T, 2)
        start_logits, end_logits = logits[..., 0], logits[..., 1]  # (B, T) each
        loss = None
        if start_positions is not None and end_positions is not None:
            T = start_logits.shape[1]
            s, e = start_positions.clamp(0, T), end_positions.clamp(0, T)
            loss = (
                F.cross_entropy(start_logits.float(), s, ignore_index=T)
                + F.cross_entropy(end_logits.float(), e, ignore_index=T)
            ) / 2
        return TaskOutput(logits=logits, loss=loss, start_logits=start_logits, end_logits=end_logits)


def build_task_model(config: BertConfig, head: HeadConfig) -> _BertTaskModel:
    """The model class for `head.shape`, randomly initialised (load weights afterwards)."""
    cls = {"tagging": BertForTokenClassification, "qa": BertForQuestionAnswering}.get(
        head.shape, BertForSequenceClassification
    )
    return cls(config, head)
