"""Model configuration: one frozen dataclass and the size presets people study.

Owns the mapping between our field names and Hugging Face's `BertConfig` keys, so that
`config.json` opens in `transformers` and theirs open here. Imports only the standard library.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from bertlab.errors import CheckpointError, InputError

ATTENTION_DIRECTIONS = ("bidirectional", "left_to_right")
# rows of the span-boundary head's relative-position table: a masked token's place in its span, 0-based,
# clamped to the last row (SpanBERT's spans are at most 10 words, a few more WordPieces)
SBO_POSITIONS = 32
# which keys a query reads (bertlab.patterns): all of them; a band plus global tokens (Longformer); blocks
# of a band, random blocks and global blocks (BigBird)
ATTENTION_PATTERNS = ("full", "window", "bigbird")
# the window pattern's global tokens: none or [CLS]; others (a question's tokens) come with the input
GLOBAL_TOKENS = ("none", "cls")
PATTERN_KEYS = ("attention_pattern", "attention_window", "global_tokens", "attention_block", "random_blocks")


@dataclass(frozen=True)
class BertConfig:
    """Shape and behaviour of a BERT encoder (Devlin et al. 2018, section 3)."""

    model_type: ClassVar[str] = "bert"  # config.json's model_type: the family (bertlab.models.registry)

    vocab_size: int = 30522  # WordPiece vocabulary size; Google's English vocab has 30,522
    hidden_size: int = 768  # H in the paper
    num_layers: int = 12  # L in the paper
    num_heads: int = 12  # A in the paper
    intermediate_size: int = 3072  # feed-forward width, 4H in the paper
    max_position_embeddings: int = 512  # longest input the position table covers
    type_vocab_size: int = 2  # segment A / segment B
    hidden_dropout: float = 0.1  # dropout on embeddings and every sub-layer output
    attention_dropout: float = 0.1  # dropout on attention probabilities
    layer_norm_eps: float = 1e-12  # BERT's LayerNorm epsilon
    initializer_range: float = 0.02  # std of the normal init of weights
    pad_token_id: int = 0  # [PAD] in BERT vocabularies
    attention_direction: str = "bidirectional"  # "left_to_right" is the paper's LTR ablation (causal mask)
    use_nsp_head: bool = True  # False for the "No NSP" ablation: the checkpoint has no NSP weights
    # SpanBERT's span-boundary head (`cls.span_boundary`, the span_sbo objective's): predicts a masked
    # token from its span's two boundary tokens; only the BERT family builds it
    span_boundary_head: bool = False
    # heads removed from layers, ((layer, (head, ...)), ...) in the unpruned numbering: transformers 4's
    # config.json `pruned_heads`. A tuple, not a dict, so the config stays hashable; `heads_in_layer`
    # reads it (bertlab compress prune writes it)
    pruned_heads: tuple[tuple[int, tuple[int, ...]], ...] = ()
    attention_pattern: str = "full"  # ATTENTION_PATTERNS; "window" and "bigbird" cost time linear in length
    attention_window: int = 256  # "window": the whole window, half on each side (transformers' Longformer)
    global_tokens: str = "cls"  # "window": GLOBAL_TOKENS, the tokens that read and are read by every token
    attention_block: int = 64  # "bigbird": tokens per block
    random_blocks: int = 3  # "bigbird": random key blocks each query block reads

    def __post_init__(self) -> None:
        if self.hidden_size % self.num_heads:
            raise ValueError(f"hidden_size {self.hidden_size} must be divisible by num_heads {self.num_heads}")
        if self.attention_direction not in ATTENTION_DIRECTIONS:
            raise ValueError(
                f"attention_direction must be one of {ATTENTION_DIRECTIONS}, got {self.attention_direction!r}"
            )
        self._check_pattern()
        for name in ("vocab_size", "hidden_size", "num_layers", "num_heads", "intermediate_size"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        for layer, heads in self.pruned_heads:
            if not 0 <= layer < self.num_layers or not all(0 <= h < self.num_heads for h in heads):
                raise ValueError(
                    f"pruned_heads: layer {layer} heads {list(heads)} fall outside "
                    f"{self.num_layers} layers of {self.num_heads} heads"
                )
            if len(set(heads)) >= self.num_heads:
                raise ValueError(f"pruned_heads: layer {layer} would have no heads left; keep at least one")

    def _check_pattern(self) -> None:
        if self.attention_pattern not in ATTENTION_PATTERNS:
            raise ValueError(f"attention_pattern must be one of {ATTENTION_PATTERNS}, got {self.attention_pattern!r}")
        if self.global_tokens not in GLOBAL_TOKENS:
            raise ValueError(f"global_tokens must be one of {GLOBAL_TOKENS}, got {self.global_tokens!r}")
        if self.attention_window < 2 or self.attention_window % 2:
            raise ValueError(f"attention_window is the whole window: an even number >= 2, got {self.attention_window}")
        if self.attention_block < 1 or self.random_blocks < 0:
            raise ValueError(
                f"attention_block must be >= 1 and random_blocks >= 0, got {self.attention_block}, {self.random_blocks}"
            )
        if self.attention_pattern != "full" and self.attention_direction != "bidirectional":
            raise ValueError("a sparse attention_pattern works with bidirectional attention only")

    @property
    def sparse(self) -> bool:
        """True when attention reads a pattern's keys (window, bigbird), not every key."""
        return self.attention_pattern != "full"

    def pattern_fields(self) -> dict[str, Any]:
        """The attention pattern's config.json entries (bertlab section); none for full attention."""
        if not self.sparse:
            return {}
        keys = {"window": ("attention_window", "global_tokens"), "bigbird": ("attention_block", "random_blocks")}
        return {
            "attention_pattern": self.attention_pattern,
            **{k: getattr(self, k) for k in keys[self.attention_pattern]},
        }

    def pruned_in(self, layer: int) -> tuple[int, ...]:
        """The heads removed from `layer` (unpruned numbering), ascending; () for an unpruned layer."""
        return tuple(sorted(set(dict(self.pruned_heads).get(layer, ()))))

    def heads_in_layer(self, layer: int) -> int:
        """How many heads `layer` has (num_heads unless some were pruned)."""
        return self.num_heads - len(self.pruned_in(layer))

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_heads

    def replace(self, **changes: Any) -> BertConfig:
        return dataclasses.replace(self, **changes)

    # --- Hugging Face config.json -------------------------------------------------------
    def to_hf_dict(self, architecture: str = "BertForPreTraining", extra: dict | None = None) -> dict:
        """The `config.json` content: BertConfig keys plus a `bertlab` section for our fields."""
        data = {
            "architectures": [architecture],
            "model_type": self.model_type,
            "vocab_size": self.vocab_size,
            "hidden_size": self.hidden_size,
            "num_hidden_layers": self.num_layers,
            "num_attention_heads": self.num_heads,
            "intermediate_size": self.intermediate_size,
            "hidden_act": "gelu",
            "hidden_dropout_prob": self.hidden_dropout,
            "attention_probs_dropout_prob": self.attention_dropout,
            "max_position_embeddings": self.max_position_embeddings,
            "type_vocab_size": self.type_vocab_size,
            "initializer_range": self.initializer_range,
            "layer_norm_eps": self.layer_norm_eps,
            "pad_token_id": self.pad_token_id,
            "position_embedding_type": "absolute",
            "is_decoder": False,
            "bertlab": {
                "attention_direction": self.attention_direction,
                "use_nsp_head": self.use_nsp_head,
                **({"span_boundary_head": True} if self.span_boundary_head else {}),  # absent: no SBO head
                **self.pattern_fields(),
            },
        }
        if self.pruned_heads:  # transformers 4 reads it (5 dropped head pruning); absent when nothing is pruned
            data["pruned_heads"] = {str(layer): list(heads) for layer, heads in self.pruned_heads}
        if extra:
            data["bertlab"].update(extra)
        return data

    @classmethod
    def from_hf_dict(cls, data: dict, source: str = "config.json") -> BertConfig:
        """Read a Hugging Face `config.json` dict (ours or one written by `transformers`)."""
        act = data.get("hidden_act", "gelu")
        if act not in ("gelu", "gelu_python"):
            raise CheckpointError(f"{source}: hidden_act {act!r} is not supported (only 'gelu')")
        pos_type = data.get("position_embedding_type", "absolute")
        if pos_type != "absolute":
            raise CheckpointError(f"{source}: position_embedding_type {pos_type!r} is not supported (only 'absolute')")
        try:
            ours = data.get("bertlab", {}) or {}
            return cls(
                vocab_size=int(data["vocab_size"]),
                hidden_size=int(data["hidden_size"]),
                num_layers=int(data["num_hidden_layers"]),
                num_heads=int(data["num_attention_heads"]),
                intermediate_size=int(data["intermediate_size"]),
                max_position_embeddings=int(data.get("max_position_embeddings", 512)),
                type_vocab_size=int(data.get("type_vocab_size", 2)),
                hidden_dropout=float(data.get("hidden_dropout_prob", 0.1)),
                attention_dropout=float(data.get("attention_probs_dropout_prob", 0.1)),
                layer_norm_eps=float(data.get("layer_norm_eps", 1e-12)),
                initializer_range=float(data.get("initializer_range", 0.02)),
                pad_token_id=int(data.get("pad_token_id", 0) or 0),
                attention_direction=ours.get("attention_direction", "bidirectional"),
                use_nsp_head=bool(ours.get("use_nsp_head", True)),
                span_boundary_head=bool(ours.get("span_boundary_head", False)),
                pruned_heads=_read_pruned_heads(data.get("pruned_heads") or {}),
                **{k: ours[k] for k in PATTERN_KEYS if k in ours},
            )
        except KeyError as exc:
            raise CheckpointError(f"{source}: missing key {exc.args[0]!r}; is this a BERT config?") from exc
        except (TypeError, ValueError) as exc:
            raise CheckpointError(f"{source}: {exc}") from exc


def _read_pruned_heads(raw: dict) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """config.json's `pruned_heads` ({"layer": [head, ...]}, as transformers 4 writes it) as BertConfig holds it."""
    if not isinstance(raw, dict):
        raise TypeError(f"pruned_heads must be an object of layer -> heads, got {type(raw).__name__}")
    pairs = ((int(layer), tuple(sorted({int(h) for h in heads}))) for layer, heads in raw.items())
    return tuple(sorted((layer, heads) for layer, heads in pairs if heads))


def parameter_count(config: BertConfig) -> int:
    """Parameters of a BertForPreTraining with this config (tied decoder counted once).

    Embeddings (word, position, segment, LayerNorm), L layers of attention + feed-forward with
    their LayerNorms, the pooler, the MLM transform and output bias, the NSP head and the
    span-boundary head (its decoder is the word embeddings too).
    """
    H, V, F = config.hidden_size, config.vocab_size, config.intermediate_size
    emb = (V + config.max_position_embeddings + config.type_vocab_size) * H + 2 * H
    ffn = (H * F + F) + (F * H + H) + 2 * H
    layers = 0
    for n in range(config.num_layers):
        W = config.heads_in_layer(n) * config.head_size  # noqa: N806  (H unless heads were pruned)
        layers += 3 * (H * W + W) + (W * H + H) + 2 * H + ffn  # Q, K, V, output dense + LayerNorm; feed-forward
    pooler = H * H + H
    mlm = (H * H + H) + 2 * H + V  # transform dense, LayerNorm, output bias (decoder tied to embeddings)
    nsp = (2 * H + 2) if config.use_nsp_head else 0
    # relative positions, two dense + LayerNorm (3H -> H, H -> H), output bias
    sbo = (SBO_POSITIONS * H + (3 * H * H + H) + (H * H + H) + 4 * H + V) if config.span_boundary_head else 0
    return emb + layers + pooler + mlm + nsp + sbo


def _preset(layers: int, hidden: int, heads: int) -> BertConfig:
    return BertConfig(hidden_size=hidden, num_layers=layers, num_heads=heads, intermediate_size=4 * hidden)


PRESETS: dict[str, BertConfig] = {
    "tiny": _preset(2, 128, 2),
    "mini": _preset(4, 256, 4),
    "small": _preset(4, 512, 8),
    "medium": _preset(8, 512, 8),
    "base": _preset(12, 768, 12),
    "large": _preset(24, 1024, 16),
}


BERT_FIELDS = frozenset(f.name for f in dataclasses.fields(BertConfig))  # what `preset` overrides may set


def preset(name: str, **overrides: Any) -> BertConfig:
    """A preset size (tiny, mini, small, medium, base, large) with optional field overrides."""
    if name not in PRESETS:
        raise ValueError(f"unknown model size {name!r}; choose one of {', '.join(PRESETS)}")
    return PRESETS[name].replace(**overrides)


def coerce_field(value: Any, type_name: str, key: str) -> Any:
    """Bring a config value to its field's declared type: YAML reads `2e-3` as a string and
    JSON stores tuples as lists."""
    try:
        if type_name == "float" and not isinstance(value, bool):
            return float(value)
        if type_name == "int" and not isinstance(value, bool):
            as_float = float(value)
            if as_float != int(as_float):
                raise ValueError("not a whole number")
            return int(as_float)
        if type_name == "bool" and isinstance(value, str):
            if value.lower() in ("true", "yes", "1", "on"):
                return True
            if value.lower() in ("false", "no", "0", "off"):
                return False
            raise ValueError("not true/false")
        if type_name.startswith("tuple") and isinstance(value, list):
            return tuple(value)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{key}={value!r}: expected {type_name} ({exc})") from exc
    return value


def dataclass_from_dict(cls: type, values: dict, section: str) -> Any:
    """Build a config dataclass from a dict, rejecting unknown keys and coercing field types."""
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(values) - set(fields)
    if unknown:
        raise InputError(f"unknown {section} keys {sorted(unknown)}; known: {sorted(fields)}")
    return cls(**{k: coerce_field(v, str(fields[k].type), f"{section}.{k}") for k, v in values.items()})
