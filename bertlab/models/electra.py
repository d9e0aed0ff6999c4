"""The ELECTRA family (Clark et al. 2020): a small generator and the discriminator it trains, model_type "electra".

ELECTRA's encoder is BERT's (bertlab.model's layers, imported, not copied) with two differences:
its embeddings may be narrower than the layers (E < H, then a linear `embeddings_project` maps them
to H) and it has no pooler. Two models sit on that encoder, as transformers names them key for key:

- the discriminator (`ElectraForPreTraining`, head "rtd"): `electra.*` and
  `discriminator_predictions.dense` / `.dense_prediction`, one logit per token of P(replaced);
- the generator (`ElectraForMaskedLM`, head "mlm"): `electra.*`, `generator_predictions.dense` /
  `.LayerNorm` and `generator_lm_head`, whose weight is the word embeddings (tied).

A pretraining run trains both at once as an `ElectraPair`: the generator (a fraction
`generator_size` of the discriminator's width; the paper's best is 1/4 to 1/2) shares the
discriminator's embeddings (token, position and segment, with their LayerNorm, as ELECTRA's code
shares its `electra/embeddings` scope), fills the masked positions with tokens sampled from its
softmax, and the discriminator says for every token whether it was replaced. The objective's loss
is bertlab.losses' "replaced_token_detection".

A pair saves as a pair folder (bertlab.storage.checkpoint, asking `halves`): `generator/` and
`discriminator/`, each a folder transformers opens as ElectraForMaskedLM / ElectraForPreTraining,
under a config.json that names them. `load_model` on a pair folder opens the generator (the masked
LM that answers fill-mask); the discriminator (the model that fine-tunes) is
`LoadedModel.halves["discriminator"]`. A folder of either half, ours or transformers', opens on its
own: its config.json's `architectures` says which half it holds.

Imports torch, bertlab.config, bertlab.errors, bertlab.model, bertlab.models.bert (the naming rules
ELECTRA's encoder shares with BERT's) and bertlab.tokenizer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from bertlab.config import BertConfig
from bertlab.errors import CheckpointError, InputError
from bertlab.model import (
    BertEmbeddings,
    BertForPreTraining,
    BertModel,
    EncoderOutput,
    PreTrainingOutput,
    init_weights,
)
from bertlab.models import bert
from bertlab.tokenizer import BertTokenizer

GENERATOR, DISCRIMINATOR, PAIR = "generator", "discriminator", "pair"
# the transformers class each role saves as; "ElectraPair" is ours: a pair folder's own config.json
ARCHITECTURES = {GENERATOR: "ElectraForMaskedLM", DISCRIMINATOR: "ElectraForPreTraining", PAIR: "ElectraPair"}
ROLE_OF_ARCHITECTURE = {arch: role for role, arch in ARCHITECTURES.items()}
DEFAULT_GENERATOR_SIZE = 0.25  # ELECTRA-Small's and -Large's (Clark et al. 2020, Table 6); Base used 1/3

ENCODER_PREFIXES = ("electra.",)  # a folder without these weights is not an ELECTRA
OPTIONAL_PREFIXES = ()  # no pooler to miss
MLM_KEYS = ("generator_predictions.dense.weight", "generator_lm_head.bias")
RTD_KEYS = ("discriminator_predictions.dense_prediction.weight",)


@dataclass(frozen=True)
class ElectraConfig(BertConfig):
    """BERT's config plus ELECTRA's embedding width, the generator's size, and which model it builds."""

    model_type: ClassVar[str] = "electra"

    embedding_size: int | None = None  # E, the embeddings' width; None = hidden_size (no projection)
    generator_size: float = DEFAULT_GENERATOR_SIZE  # a pair's generator width / the discriminator's
    role: str = DISCRIMINATOR  # what it builds: "discriminator", "generator" or "pair" (a pretraining run's)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.embedding_size is None:
            object.__setattr__(self, "embedding_size", self.hidden_size)  # frozen: set once, here
        if self.embedding_size <= 0:
            raise ValueError(f"embedding_size must be positive, got {self.embedding_size}")
        if not 0.0 < self.generator_size <= 1.0:
            raise ValueError(
                f"generator_size is the generator's width as a fraction of the discriminator's, in (0, 1] "
                f"(the paper's best: 0.25 to 0.5), got {self.generator_size}"
            )
        if self.role not in ARCHITECTURES:
            raise ValueError(f"role must be one of {tuple(ARCHITECTURES)}, got {self.role!r}")

    def embeddings_config(self) -> BertConfig:
        """The config BertEmbeddings is built from: it reads its width from hidden_size, here E."""
        return BertConfig(
            **{f.name: getattr(self, f.name) for f in dataclasses.fields(BertConfig)}
            | {"hidden_size": self.embedding_size, "num_heads": 1}
        )

    def discriminator_config(self) -> ElectraConfig:
        return dataclasses.replace(self, role=DISCRIMINATOR)

    def generator_config(self) -> ElectraConfig:
        """The generator of a pair: `generator_size` of the discriminator's width (hidden and
        feed-forward), the same depth and embeddings, heads as wide as the discriminator's where that
        divides (ELECTRA's code: 64-wide heads)."""
        hidden = max(1, round(self.hidden_size * self.generator_size))
        heads = max(1, hidden // self.head_size)
        while hidden % heads:
            heads -= 1
        return dataclasses.replace(
            self,
            hidden_size=hidden,
            num_heads=heads,
            intermediate_size=max(1, round(self.intermediate_size * self.generator_size)),
            role=GENERATOR,
        )

    def to_hf_dict(self, architecture: str | None = None, extra: dict | None = None) -> dict:
        """transformers' ElectraConfig keys (BERT's plus embedding_size); `generator_size` in our section."""
        data = super().to_hf_dict(architecture or ARCHITECTURES[self.role], extra)
        data["embedding_size"] = self.embedding_size
        data["bertlab"]["generator_size"] = self.generator_size
        return data


def config_from_hf(raw: dict, source: str) -> ElectraConfig:
    """Our ElectraConfig from config.json's content (transformers' ElectraConfig keys, or a run's).

    Which model it builds is read from `architectures`: ElectraForMaskedLM is a generator, ElectraPair
    a pair folder, any other Electra class (ElectraForPreTraining, ElectraModel, a fine-tuned
    ElectraFor...) or none a discriminator; a pretraining run's config, which the recipe reads from
    BERT's keys (no Electra class named), builds the pair it trains.
    """
    architectures = raw.get("architectures") or [ARCHITECTURES[DISCRIMINATOR]]
    name = str(architectures[0])
    role = ROLE_OF_ARCHITECTURE.get(name, DISCRIMINATOR if name.startswith("Electra") else PAIR)
    ours = raw.get("bertlab") or {}
    base = ElectraConfig.from_hf_dict(raw, source)
    try:
        return dataclasses.replace(
            base,
            embedding_size=int(raw.get("embedding_size") or base.hidden_size),
            generator_size=float(raw.get("generator_size", ours.get("generator_size", DEFAULT_GENERATOR_SIZE))),
            role=role,
            use_nsp_head=False,  # ELECTRA has no next-sentence head
        )
    except (TypeError, ValueError) as exc:
        raise CheckpointError(f"{source}: {exc}") from exc


# --------------------------------------------------------------------------------------
# The encoder and the two heads
# --------------------------------------------------------------------------------------
@dataclass
class ElectraOutput(PreTrainingOutput):
    """What the ELECTRA models return, beside BERT's fields (`mlm_logits` is None for a discriminator,
    which has no masked-LM head).

    Attributes:
        rtd_logits: (B, T) float, the discriminator's logit of P(replaced) at every position.
        corrupted_ids: (B, T) long, a pair's: the discriminator's input, the generator's samples at
            the masked positions and the input elsewhere.
    """

    rtd_logits: torch.Tensor | None = None
    corrupted_ids: torch.Tensor | None = None


class FirstToken(nn.Module):
    """ELECTRA has no pooler: the [CLS] vector stands where BERT's pooled output does (no weights)."""

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return hidden[:, 0]  # (B, H)


class ElectraModel(BertModel):
    """transformers' ElectraModel: BERT's encoder, embeddings E wide (projected to H when E != H), no pooler.

    `embeddings` shares another model's (a pair's generator reads the discriminator's)."""

    def __init__(self, config: ElectraConfig, embeddings: BertEmbeddings | None = None):
        super().__init__(config)
        self.embeddings = embeddings if embeddings is not None else BertEmbeddings(config.embeddings_config())
        if config.embedding_size != config.hidden_size:
            self.embeddings_project = nn.Linear(config.embedding_size, config.hidden_size)
        self.pooler = FirstToken()

    def embed(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        x = self.embeddings(input_ids, token_type_ids)  # (B, T, E)
        project = getattr(self, "embeddings_project", None)  # only when E != H, as in transformers
        return project(x) if project is not None else x  # (B, T, H)


class ElectraDiscriminatorPredictions(nn.Module):
    """dense + GELU (config.hidden_act; only "gelu" is read) + a one-logit dense: P(replaced) per token."""

    def __init__(self, config: ElectraConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.dense_prediction = nn.Linear(config.hidden_size, 1)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.dense_prediction(F.gelu(self.dense(hidden))).squeeze(-1)  # (B, T)


class ElectraGeneratorPredictions(nn.Module):
    """dense H -> E + GELU (always exact GELU in transformers) + LayerNorm, before the tied output layer."""

    def __init__(self, config: ElectraConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.embedding_size)
        self.LayerNorm = nn.LayerNorm(config.embedding_size, eps=config.layer_norm_eps)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(F.gelu(self.dense(hidden)))  # (..., E)


def _no_masked_lm(what: str) -> InputError:
    return InputError(
        f"{what} has no masked-LM head (an ELECTRA discriminator says which tokens were replaced); "
        "its generator answers masked-LM questions: open the pair's folder or its generator/ folder"
    )


# --------------------------------------------------------------------------------------
# The discriminator, the generator, and the pair a run trains
# --------------------------------------------------------------------------------------
class ElectraForPreTraining(nn.Module):
    """The discriminator: transformers' ElectraForPreTraining. It scores every position; the
    `mlm_positions` and `prediction_cap` arguments of BERT's surface change nothing here."""

    tied_keys: tuple[str, ...] = ()
    heads = ("rtd",)

    def __init__(self, config: ElectraConfig, embeddings: BertEmbeddings | None = None):
        super().__init__()
        self.config = config
        self.electra = ElectraModel(config, embeddings)
        self.discriminator_predictions = ElectraDiscriminatorPredictions(config)
        init_weights(self, config.initializer_range)

    @property
    def bert(self) -> ElectraModel:
        """The encoder, under BERT's name (its weights keep transformers' `electra.`)."""
        return self.electra

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        mlm_positions: torch.Tensor | None = None,
        head_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        prediction_cap: int | None = None,
    ) -> ElectraOutput:
        """Encode (B, T) ids and return `rtd_logits` (B, T) with the encoder's output."""
        enc: EncoderOutput = self.electra(
            input_ids, token_type_ids, attention_mask, head_mask, output_attentions, output_hidden_states
        )
        rtd_logits = self.discriminator_predictions(enc.last_hidden_state)  # (B, T)
        return ElectraOutput(mlm_logits=None, nsp_logits=None, encoder=enc, rtd_logits=rtd_logits)

    def layer_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        raise _no_masked_lm("an ELECTRA discriminator")

    num_parameters = BertForPreTraining.num_parameters
    set_dropout = BertForPreTraining.set_dropout


class ElectraForMaskedLM(nn.Module):
    """The generator: transformers' ElectraForMaskedLM, a masked LM whose output layer is the word
    embeddings (tied) with its own bias."""

    tied_keys = ("generator_lm_head.weight",)  # saved once: it is the word embeddings
    heads = ("mlm",)

    def __init__(self, config: ElectraConfig, embeddings: BertEmbeddings | None = None):
        super().__init__()
        self.config = config
        self.electra = ElectraModel(config, embeddings)
        self.generator_predictions = ElectraGeneratorPredictions(config)
        self.generator_lm_head = nn.Linear(config.embedding_size, config.vocab_size)
        init_weights(self, config.initializer_range)
        self.tie_weights()

    def tie_weights(self) -> None:
        self.generator_lm_head.weight = self.electra.embeddings.word_embeddings.weight

    @property
    def bert(self) -> ElectraModel:
        """The encoder, under BERT's name (its weights keep transformers' `electra.`)."""
        return self.electra

    # BERT's forward: the encoder, then the masked-LM head at the positions asked for (the last layer
    # computed only there); it reaches the parts through bert, layer_logits and next_sentence_logits
    forward = BertForPreTraining.forward

    def layer_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """The masked-LM head on any hidden state: (..., H) -> (..., V)."""
        return self.generator_lm_head(self.generator_predictions(hidden))

    def next_sentence_logits(self, pooled: torch.Tensor) -> None:
        return None  # ELECTRA has no next-sentence head

    num_parameters = BertForPreTraining.num_parameters
    set_dropout = BertForPreTraining.set_dropout


def sample_tokens(logits: torch.Tensor) -> torch.Tensor:
    """Token ids drawn from softmax(logits): (..., V) float -> (...) long, with the Gumbel-max trick
    (argmax of logits plus Gumbel noise), as ELECTRA's code samples. No gradient flows through a
    sample; the noise comes from torch's generator, which the recipe seeds and a resumed run restores."""
    with torch.no_grad():
        uniform = torch.rand(logits.shape, device=logits.device, dtype=torch.float32)
        gumbel = -torch.log(-torch.log(uniform + 1e-9) + 1e-9)
        return (logits.detach().float() + gumbel).argmax(-1)


class ElectraPair(nn.Module):
    """What an ELECTRA pretraining run trains: `generator` and `discriminator`, sharing the embeddings.

    On BERT's surface the pair answers as its discriminator (`.bert` is the discriminator's encoder,
    the model that fine-tunes); the generator is `.generator`. It saves as a pair folder (`halves`).
    """

    tied_keys = tuple(f"generator.{k}" for k in ElectraForMaskedLM.tied_keys)
    heads = ElectraForPreTraining.heads

    def __init__(self, config: ElectraConfig):
        super().__init__()
        self.config = config
        self.discriminator = ElectraForPreTraining(config.discriminator_config())
        self.generator = ElectraForMaskedLM(config.generator_config(), embeddings=self.discriminator.electra.embeddings)

    def tie_weights(self) -> None:
        self.generator.tie_weights()

    @property
    def bert(self) -> ElectraModel:
        return self.discriminator.electra

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        mlm_positions: torch.Tensor | None = None,
        head_mask: torch.Tensor | None = None,
        output_attentions: bool = False,
        output_hidden_states: bool = False,
        prediction_cap: int | None = None,
    ) -> ElectraOutput:
        """The generator fills the positions `mlm_positions` selects with tokens sampled from its
        softmax, and the discriminator reads the result (one call, so that DDP sees one forward).

        Args:
            mlm_positions: (B, T) bool, the masked positions (training: where the labels are); None
                corrupts nothing and runs the discriminator alone.
            prediction_cap: as BertForPreTraining's: the generator's logits come in fixed slots.
            head_mask, output_attentions, output_hidden_states: the discriminator's.

        Returns:
            the generator's `mlm_logits` / `mlm_slots`, the discriminator's `encoder` and
            `rtd_logits`, and `corrupted_ids`, what the discriminator read.
        """
        generated = None
        corrupted = input_ids
        if mlm_positions is not None:
            generated = self.generator(
                input_ids, token_type_ids, attention_mask, mlm_positions, prediction_cap=prediction_cap
            )
            samples = sample_tokens(generated.mlm_logits)  # (B, K) slots or (N,) positions
            if generated.mlm_slots is not None:
                positions, used = generated.mlm_slots  # (B, K): unused slots write back what is there
                corrupted = input_ids.scatter(1, positions, torch.where(used, samples, input_ids.gather(1, positions)))
            else:
                corrupted = input_ids.masked_scatter(mlm_positions, samples)  # row-major, as the logits
        judged = self.discriminator(
            corrupted, token_type_ids, attention_mask, None, head_mask, output_attentions, output_hidden_states
        )
        return ElectraOutput(
            mlm_logits=generated.mlm_logits if generated is not None else None,
            nsp_logits=None,
            encoder=judged.encoder,
            mlm_slots=generated.mlm_slots if generated is not None else None,
            rtd_logits=judged.rtd_logits,
            corrupted_ids=corrupted,
        )

    def layer_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        raise _no_masked_lm("an ELECTRA pair answers as its discriminator, which")

    num_parameters = BertForPreTraining.num_parameters  # the shared embeddings counted once
    set_dropout = BertForPreTraining.set_dropout


# --------------------------------------------------------------------------------------
# What the checkpoint reader asks of a family (bertlab.models.registry.FamilyImplementation)
# --------------------------------------------------------------------------------------
ElectraModule = ElectraForPreTraining | ElectraForMaskedLM | ElectraPair
BUILDERS: dict[str, type[ElectraModule]] = {
    DISCRIMINATOR: ElectraForPreTraining,
    GENERATOR: ElectraForMaskedLM,
    PAIR: ElectraPair,
}


def build(config: ElectraConfig) -> ElectraModule:
    """A freshly initialised discriminator, generator or pair, as `config.role` says."""
    return BUILDERS[config.role](config)


def build_encoder(config: ElectraConfig) -> ElectraModel:
    """The encoder alone (no pooler): what ElectraForSequenceClassification holds under `electra.`."""
    return ElectraModel(config)


def task_config(config: ElectraConfig) -> ElectraConfig:
    """The config a fine-tuned ELECTRA is built and saved with: the discriminator's, the model that
    fine-tunes (Clark et al. 2020), whatever half or pair the config described."""
    return config.discriminator_config()


def normalize_keys(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """BERT's renaming rules (TF-era LayerNorm names, buffers, a bare encoder) with ELECTRA's prefix."""
    return bert.normalize_keys(state, prefix="electra.")


def architecture(config: ElectraConfig) -> str:
    """The transformers class a folder of this config is saved as ("ElectraPair": a pair folder)."""
    return ARCHITECTURES[config.role]


def halves(model: nn.Module) -> dict[str, nn.Module]:
    """The models a pair saves as, by subfolder: the generator first (what a pair folder opens as:
    the masked LM), then the discriminator; {} for a model saved whole."""
    if isinstance(model, ElectraPair):
        return {GENERATOR: model.generator, DISCRIMINATOR: model.discriminator}
    return {}


def expected_shapes(config: ElectraConfig) -> dict[str, tuple[int, ...]]:
    """The shape config.json implies for each weight (transformers' names), by arithmetic as
    bert.expected_shapes does (the layers are BERT's, so their table is BERT's under `electra.`)."""
    if config.role == PAIR:
        return {
            f"{name}.{k}": shape
            for name, half in ((GENERATOR, config.generator_config()), (DISCRIMINATOR, config.discriminator_config()))
            for k, shape in expected_shapes(half).items()
        }
    e, h, v = config.embedding_size, config.hidden_size, config.vocab_size

    def linear(name: str, out_features: int, in_features: int) -> dict[str, tuple[int, ...]]:
        return {f"{name}.weight": (out_features, in_features), f"{name}.bias": (out_features,)}

    shapes = {
        "electra.embeddings.word_embeddings.weight": (v, e),
        "electra.embeddings.position_embeddings.weight": (config.max_position_embeddings, e),
        "electra.embeddings.token_type_embeddings.weight": (config.type_vocab_size, e),
        "electra.embeddings.LayerNorm.weight": (e,),
        "electra.embeddings.LayerNorm.bias": (e,),
    }
    shapes.update(
        {
            "electra." + k.removeprefix("bert."): shape
            for k, shape in bert.expected_shapes(config).items()
            if k.startswith("bert.encoder.")
        }
    )
    if e != h:
        shapes.update(linear("electra.embeddings_project", h, e))
    if config.role == GENERATOR:
        shapes.update(linear("generator_predictions.dense", e, h))
        shapes.update({"generator_predictions.LayerNorm.weight": (e,), "generator_predictions.LayerNorm.bias": (e,)})
        shapes.update(linear("generator_lm_head", v, e))  # its weight is the word embeddings
    else:
        shapes.update(linear("discriminator_predictions.dense", h, h))
        shapes.update(linear("discriminator_predictions.dense_prediction", 1, h))
    return shapes


def heads_in(config: ElectraConfig, state: Mapping[str, Any]) -> tuple[str, ...]:
    """The heads whose weights `state` holds: "mlm" (a generator), "rtd" (a discriminator), or none
    (an encoder or a fine-tuned classifier); a pair's are its discriminator's, which it answers as."""
    if config.role == PAIR:
        prefix = f"{DISCRIMINATOR}."
        state = {k.removeprefix(prefix): v for k, v in state.items() if k.startswith(prefix)}
    found = {"mlm": all(k in state for k in MLM_KEYS), "rtd": all(k in state for k in RTD_KEYS)}
    return tuple(head for head, present in found.items() if present)


def load_tokenizer(directory: Path, config: ElectraConfig) -> BertTokenizer:
    """The folder's WordPiece tokenizer: ELECTRA's releases use BERT's vocab.txt."""
    return bert.load_tokenizer(directory, config)
