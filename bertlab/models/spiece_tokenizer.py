"""SentencePiece unigram tokenizers, ALBERT's (Lan et al. 2019), read from `spiece.model` or from
transformers' `tokenizer.json`, and run with `tokenizers`.

Owns: reading a SentencePiece model file (a protobuf: its pieces with their scores, the model type,
the unknown piece and the normalisation map), the pipeline transformers 5's AlbertTokenizer builds
over it, ALBERT's special tokens ([CLS] [SEP] <pad> <unk> [MASK]), its files as transformers writes
and reads them, and how an answer reads as a word: '▁' starts a word, and a piece without it
continues the word on its left ('▁cat' 's' -> 'cats'); a fill-mask answer '▁mat' reads 'mat'.

The pipeline, as transformers 5's AlbertTokenizer (tokenization_albert.py) builds it from a
spiece.model: "``" and "''" read '"'; accents stripped (NFKD, then the combining marks dropped)
unless `keep_accents`; lower case when `do_lower_case` (albert-*-v2: both defaults); then the model's
own normalisation map (SentencePiece's nmt_nfkc); the text split at white space, each word given a
leading '▁', and a unigram model over the pieces and their scores. A `tokenizer.json` (what
AlbertTokenizer.save_pretrained writes, and what the Hub's ALBERT repos hold beside spiece.model)
is used as written, as transformers uses it, and preferred to spiece.model when both are there.

The model file is read here, by the protobuf wire format, for its three messages (pieces, trainer
spec, normaliser spec): neither `sentencepiece` nor `protobuf` is needed to open an ALBERT, and a
damaged file is a CheckpointError that says which file and what to do.

`SentencePieceTokenizer` subclasses bertlab.tokenizer.BertTokenizer, so that the encoding, the
truncation, word ids and offsets are the same code, and the inference API and the pages take it as
they take WordPiece's. A "[mask]" the user types in any case reads as [MASK] (BertTokenizer's rule).

Imports `tokenizers`, bertlab.errors and bertlab.tokenizer; no torch.
"""

from __future__ import annotations

import json
import shutil
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

from bertlab.errors import CheckpointError, InputError
from bertlab.tokenizer import BertTokenizer, WordStartPieces

SPIECE_MODEL, TOKENIZER_JSON, TOKENIZER_CONFIG = "spiece.model", "tokenizer.json", "tokenizer_config.json"
SPECIAL_TOKENS = ("<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]")  # ALBERT's, ids 0-4 in its releases
WORD_START = "▁"  # SentencePiece's mark of a word's leading space (U+2581)
VISIBLE_SPACE = "␣"  # how a page draws a piece's leading space, as for RoBERTa's 'Ġ' (readable_tokens)
UNIGRAM = 1  # TrainerSpec.model_type: 1 unigram (ALBERT's), 2 BPE, 3 word, 4 char
_MODEL_TYPES = {1: "unigram", 2: "BPE", 3: "word", 4: "char"}


# --------------------------------------------------------------------------------------
# spiece.model: the protobuf wire format, for the fields a unigram tokenizer needs
# --------------------------------------------------------------------------------------
class _Malformed(ValueError):
    """The bytes are not a protobuf message (read_spiece_model turns it into a CheckpointError)."""


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if i >= len(buf) or shift > 63:
            raise _Malformed("a number runs past the end of the file")
        byte = buf[i]
        value |= (byte & 0x7F) << shift
        i, shift = i + 1, shift + 7
        if not byte & 0x80:
            return value, i


def _fields(buf: bytes) -> Iterator[tuple[int, int | bytes]]:
    """(field number, value) of each field of one message: an int for varints, bytes for the rest."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire in (1, 2, 5):
            if wire == 2:
                size, i = _varint(buf, i)
            else:
                size = 8 if wire == 1 else 4
            if i + size > len(buf):
                raise _Malformed(f"field {number} runs past the end of the file")
            value, i = buf[i : i + size], i + size
        else:
            raise _Malformed(f"field {number} has wire type {wire}, which no SentencePiece model uses")
        if number == 0:
            raise _Malformed("a field numbered 0")
        yield number, value


def _piece(message: bytes, index: int) -> tuple[str, float]:
    """A SentencePiece message's (piece, score)."""
    piece, score = None, 0.0
    for n, v in _fields(message):
        if n == 1 and isinstance(v, bytes):
            piece = v.decode("utf-8")
        elif n == 2 and isinstance(v, bytes) and len(v) == 4:
            score = struct.unpack("<f", v)[0]  # a float32, little-endian
    if piece is None:
        raise _Malformed(f"piece {index} has no text")
    return piece, score


def _charsmap_ok(charsmap: bytes) -> bool:
    """Whether a precompiled normalisation map has its parts: a little-endian uint32 size, a trie of
    that many bytes (uint32 units), then the replacement strings. `tokenizers` checks less, and a
    size past the end panics in Rust at the first text normalised rather than failing at load."""
    if len(charsmap) < 4:
        return False
    trie_size = struct.unpack("<I", charsmap[:4])[0]
    return trie_size % 4 == 0 and 4 + trie_size <= len(charsmap)


@dataclass(frozen=True)
class SentencePieceModel:
    """What a unigram tokenizer needs from a `spiece.model` (sentencepiece_model.proto's ModelProto)."""

    pieces: tuple[tuple[str, float], ...]  # (piece, log-probability score), in id order
    model_type: int = UNIGRAM  # TrainerSpec.model_type
    unk_id: int = 0  # TrainerSpec.unk_id: the piece for text no piece covers
    precompiled_charsmap: bytes = b""  # NormalizerSpec: the normalisation rules, compiled (nmt_nfkc's)


def read_spiece_model(path: str | Path) -> SentencePieceModel:
    """Read a SentencePiece model file.

    Raises:
        CheckpointError: the file is missing, is not a SentencePiece model, or holds no pieces.
    """
    path = Path(path)
    try:
        buf = path.read_bytes()
    except OSError as exc:
        raise CheckpointError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    pieces: list[tuple[str, float]] = []
    model_type, unk_id, charsmap = UNIGRAM, 0, b""
    specs: set[int] = set()  # which of trainer_spec (2) and normalizer_spec (3) the file holds
    try:
        for number, value in _fields(buf):
            if not isinstance(value, bytes):
                continue  # ModelProto's fields are all messages; a number here belongs to no field we read
            if number == 1:  # ModelProto.pieces
                pieces.append(_piece(value, len(pieces)))
            elif number == 2:  # ModelProto.trainer_spec
                specs.add(number)
                for n, v in _fields(value):
                    if n == 3 and isinstance(v, int):
                        model_type = v
                    elif n == 40 and isinstance(v, int):
                        unk_id = v
            elif number == 3:  # ModelProto.normalizer_spec
                specs.add(number)
                for n, v in _fields(value):
                    if n == 2 and isinstance(v, bytes):
                        charsmap = v
    except (_Malformed, UnicodeDecodeError) as exc:
        raise CheckpointError(
            f"{path}: is not a SentencePiece model ({exc}); the file is damaged or truncated: "
            "download it again (an ALBERT release's spiece.model is about 760 KB)"
        ) from None
    if not pieces:
        raise CheckpointError(
            f"{path}: holds no SentencePiece pieces (empty or not a SentencePiece model): download it again"
        )
    if specs != {2, 3}:  # every trainer writes both, after the pieces: a file cut off between fields
        raise CheckpointError(
            f"{path}: a SentencePiece model without its trainer or normaliser settings, cut off after its "
            f"{len(pieces)} pieces: download it again"
        )
    if charsmap and not _charsmap_ok(charsmap):
        raise CheckpointError(f"{path}: its SentencePiece normalisation map is damaged: download it again")
    if model_type != UNIGRAM:
        raise CheckpointError(
            f"{path}: a {_MODEL_TYPES.get(model_type, str(model_type))} SentencePiece model; BERT Lab reads "
            "unigram ones (ALBERT's)"
        )
    if not 0 <= unk_id < len(pieces):
        raise CheckpointError(f"{path}: its unknown piece, id {unk_id}, is not among its {len(pieces)} pieces")
    return SentencePieceModel(tuple(pieces), model_type, unk_id, charsmap)


# --------------------------------------------------------------------------------------
# The pipeline
# --------------------------------------------------------------------------------------
def _albert_pipeline(spm: SentencePieceModel, lowercase: bool, keep_accents: bool, source: Path) -> Tokenizer:
    """transformers 5's AlbertTokenizer over `spm` (the module docstring's steps, in its order)."""
    steps = [normalizers.Replace("``", '"'), normalizers.Replace("''", '"')]
    if not keep_accents:
        steps += [normalizers.NFKD(), normalizers.StripAccents()]
    if lowercase:
        steps.append(normalizers.Lowercase())
    try:
        if spm.precompiled_charsmap:
            steps.append(normalizers.Precompiled(spm.precompiled_charsmap))
        tok = Tokenizer(models.Unigram(list(spm.pieces), unk_id=spm.unk_id, byte_fallback=False))
    except Exception as exc:  # the Rust constructors raise a bare Exception for every bad input
        raise CheckpointError(f"{source}: its pieces or normalisation map cannot be used ({exc})") from None
    tok.normalizer = normalizers.Sequence(steps)
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Metaspace(replacement=WORD_START, prepend_scheme="always")]
    )
    tok.decoder = decoders.Metaspace(replacement=WORD_START, prepend_scheme="always")
    return tok


def _finish(tok: Tokenizer, source: Path) -> Tokenizer:
    """ALBERT's specials as added tokens (so "[MASK]" typed in text stays one token) and its template:
    [CLS] A [SEP], pairs [CLS] A [SEP] B [SEP] with B's segment 1."""
    vocab = tok.get_vocab()
    missing = [t for t in SPECIAL_TOKENS if t not in vocab]
    if missing:
        raise CheckpointError(
            f"{source}: the SentencePiece vocabulary lacks the special tokens {missing}; "
            f"ALBERT's has all of {' '.join(SPECIAL_TOKENS)}"
        )
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0",
        pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    tok.no_truncation()
    tok.no_padding()
    return tok


def _json_model_type(path: Path) -> str | None:
    """The `model.type` of a tokenizer.json ("Unigram", "WordPiece", "BPE"), None when unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    model = data.get("model") if isinstance(data, dict) else None
    return model.get("type") if isinstance(model, dict) else None


def holds_sentencepiece(directory: str | Path) -> bool:
    """Whether a checkpoint folder's tokenizer is SentencePiece: no WordPiece vocab.txt, and a
    spiece.model or a unigram tokenizer.json."""
    directory = Path(directory)
    if (directory / "vocab.txt").is_file():
        return False
    if (directory / SPIECE_MODEL).is_file():
        return True
    return (directory / TOKENIZER_JSON).is_file() and _json_model_type(directory / TOKENIZER_JSON) == "Unigram"


def _lowercases(node: object) -> bool:
    """Whether a tokenizer.json normaliser (a node of its JSON) lower-cases."""
    if isinstance(node, dict):
        return node.get("type") == "Lowercase" or any(_lowercases(n) for n in node.get("normalizers") or [])
    return False


# --------------------------------------------------------------------------------------
# The tokenizer
# --------------------------------------------------------------------------------------
class SentencePieceTokenizer(WordStartPieces, BertTokenizer):
    """ALBERT's SentencePiece unigram tokenizer with BertTokenizer's interface (see the module docstring)."""

    pad_token, unk_token, cls_token, sep_token, mask_token = "<pad>", "<unk>", "[CLS]", "[SEP]", "[MASK]"
    word_start = WORD_START

    def __init__(
        self,
        tokenizer: Tokenizer,
        lowercase: bool,
        model_max_length: int = 512,
        keep_accents: bool = False,
        spiece_model: Path | None = None,
    ):
        super().__init__(tokenizer, lowercase=lowercase, model_max_length=model_max_length)
        self.keep_accents = keep_accents
        self.spiece_model = spiece_model  # the file it was read from, copied beside a saved copy
        self._specials = frozenset(SPECIAL_TOKENS)

    # --- construction -------------------------------------------------------------------
    @classmethod
    def from_spiece_model(
        cls, path: str | Path, lowercase: bool = True, keep_accents: bool = False, model_max_length: int = 512
    ) -> SentencePieceTokenizer:
        """Read a `spiece.model`; `lowercase` and `keep_accents` as transformers' AlbertTokenizer's
        `do_lower_case` and `keep_accents` (its defaults, albert-*-v2's)."""
        path = Path(path)
        tok = _finish(_albert_pipeline(read_spiece_model(path), lowercase, keep_accents, path), path)
        return cls(tok, lowercase, model_max_length, keep_accents, path)

    @classmethod
    def from_tokenizer_json(cls, path: str | Path, model_max_length: int = 512) -> SentencePieceTokenizer:
        """Read transformers' `tokenizer.json` of a unigram tokenizer (AlbertTokenizer.save_pretrained's),
        its normalisation as written.

        Raises:
            CheckpointError: the file is unreadable, or its model is not unigram.
        """
        path = Path(path)
        kind = _json_model_type(path)
        if kind != "Unigram":
            raise CheckpointError(f"{path}: not a unigram (SentencePiece) tokenizer; its model is {kind!r}")
        try:
            tok = Tokenizer.from_file(str(path))
            normalizer = json.loads(path.read_text(encoding="utf-8")).get("normalizer")
        except Exception as exc:  # the Rust reader raises a bare Exception for every malformed file
            raise CheckpointError(f"{path}: cannot be read as a tokenizer ({exc})") from None
        lowercase = _lowercases(normalizer)
        keep_accents = "StripAccents" not in json.dumps(normalizer)
        return cls(_finish(tok, path), lowercase, model_max_length, keep_accents)

    @classmethod
    def from_dir(cls, directory: str | Path, model_max_length: int | None = None) -> SentencePieceTokenizer:
        """Load from a checkpoint folder: its unigram tokenizer.json, or without one its spiece.model
        read with tokenizer_config.json's `do_lower_case` and `keep_accents` (AlbertTokenizer's
        defaults, True and False, when it does not say); the longest input from tokenizer_config.json
        when it says, capped at `model_max_length`.

        Raises:
            CheckpointError: neither file, or one that cannot be read.
        """
        directory = Path(directory)
        cfg: dict = {}
        cfg_path = directory / TOKENIZER_CONFIG
        if cfg_path.is_file():
            try:
                cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise CheckpointError(f"{cfg_path}: not valid JSON ({exc})") from None
            if not isinstance(cfg, dict):
                raise CheckpointError(f"{cfg_path}: not a JSON object")
        ml = cfg.get("model_max_length")
        max_len = ml if isinstance(ml, int) and 0 < ml < 100_000 else 512
        if model_max_length is not None:
            max_len = min(max_len, model_max_length)
        json_path, spm_path = directory / TOKENIZER_JSON, directory / SPIECE_MODEL
        if json_path.is_file() and (_json_model_type(json_path) == "Unigram" or not spm_path.is_file()):
            tokenizer = cls.from_tokenizer_json(json_path, max_len)
            if spm_path.is_file():
                tokenizer.spiece_model = spm_path
            return tokenizer
        if spm_path.is_file():
            lowercase, keep_accents = cfg.get("do_lower_case", True), cfg.get("keep_accents", False)
            return cls.from_spiece_model(spm_path, bool(lowercase), bool(keep_accents), max_len)
        raise CheckpointError(
            f"{directory}: no {SPIECE_MODEL} or {TOKENIZER_JSON}; a SentencePiece checkpoint folder needs one"
        )

    # --- saving -------------------------------------------------------------------------
    def save(self, directory: str | Path) -> None:
        """Write tokenizer.json, tokenizer_config.json and special_tokens_map.json as transformers'
        AlbertTokenizer writes and reads them, and the spiece.model this was read from, when any."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        specials = {
            "bos_token": "[CLS]",
            "eos_token": "[SEP]",
            "unk_token": "<unk>",
            "sep_token": "[SEP]",
            "pad_token": "<pad>",
            "cls_token": "[CLS]",
            "mask_token": "[MASK]",
        }
        config = {
            "tokenizer_class": "AlbertTokenizer",
            "do_lower_case": self.lowercase,
            "keep_accents": self.keep_accents,
            "model_max_length": self.model_max_length,
            **specials,
        }
        (directory / TOKENIZER_CONFIG).write_text(json.dumps(config, indent=2), encoding="utf-8")
        (directory / "special_tokens_map.json").write_text(json.dumps(specials, indent=2), encoding="utf-8")
        self._tok.save(str(directory / TOKENIZER_JSON))
        if self.spiece_model is not None and self.spiece_model.resolve() != (directory / SPIECE_MODEL).resolve():
            shutil.copyfile(self.spiece_model, directory / SPIECE_MODEL)

    def save_vocab(self, path: str | Path) -> None:
        """Not for SentencePiece: a vocab.txt of its pieces would open as WordPiece. Use `save`."""
        raise InputError(
            f"{path}: a SentencePiece tokenizer is not saved as a vocab.txt; save the whole tokenizer with "
            "save(directory) (tokenizer.json and spiece.model)"
        )

    # --- answers as words ----------------------------------------------------------------
    def piece_text(self, token: str) -> str:
        """What a piece spells, its word start as a space: '▁mat' -> ' mat', 's' -> 's'."""
        return token.replace(WORD_START, " ")

    def readable_tokens(self, tokens: Sequence[str]) -> list[str]:
        """Tokens as a page draws them: a word's leading '▁' as '␣' ('▁mat' -> '␣mat', as RoBERTa's
        'Ġmat' is drawn), special tokens as they are."""
        return [t if t in self._specials else t.replace(WORD_START, VISIBLE_SPACE) for t in tokens]

    def whole_word(self, tokens: Sequence[str], position: int, token: str, attached: bool | None = None) -> str:
        """The word `token` forms at `position` with the pieces around it that continue it ('▁cat'
        before 's' -> 'cats'). A piece without '▁' joins the word on its left only where the position
        was inside a word as typed (`attached`); elsewhere it reads 'the + s', as WordPiece's 'is + ##s'.

        Args:
            attached: whether the position continues the word on its left as typed; None reads it
                from `tokens` (True when `tokens[position]` itself continues its left neighbour).
        """
        if attached is None:
            attached = position > 0 and self._joins(tokens[position - 1], tokens[position])
        left, i, piece = "", position, token
        while i > 0 and self._joins(tokens[i - 1], piece):
            i -= 1
            piece = tokens[i]
            left = self.piece_text(piece) + left
        right, j, piece = "", position + 1, token
        while j < len(tokens) and self._joins(piece, tokens[j]):
            piece = tokens[j]
            right += self.piece_text(piece)
            j += 1
        core = self.piece_text(token)
        if left.strip() and not attached:
            return f"{left.strip()} + {core}{right}"
        return (left + core + right).strip()
