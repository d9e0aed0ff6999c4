"""WordPiece tokenization through the `tokenizers` library, behaving as BERT's own tokenizer.

Owns: loading a BERT `vocab.txt` (cased or uncased), training a new vocabulary from text files,
encoding single sentences and pairs with [CLS]/[SEP] and segment ids, truncation with a clear
signal, offsets that map pieces back to words, and how an answer reads as a word of the text typed
(`whole_word`, `fill_text`: a ## piece joins the word it continues; the tokenizer's methods of the
same names, which another family's tokenizer overrides with its own rule). Imports `tokenizers`,
bertlab.atomic and bertlab.errors.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors
from tokenizers.trainers import WordPieceTrainer

from bertlab.atomic import write_text_atomic
from bertlab.errors import CheckpointError, InputError

log = logging.getLogger(__name__)

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
_MASK_ANY_CASE = re.compile(r"\[mask\]", re.IGNORECASE)


def mask_any_case(text: str) -> str:
    """`text` with "[mask]" written in any case as "[MASK]": how `encode`/`encode_batch` read a text
    (users of an uncased model type it in lower case). Same length: character offsets hold.
    `tokenize`/`tokenize_batch` (pretraining corpora, tagged words) read text as BERT's own tokenizer
    does, where only "[MASK]" is the mask."""
    return _MASK_ANY_CASE.sub("[MASK]", text) if "[" in text else text


@dataclass
class Encoding:
    """One tokenized input.

    Attributes:
        ids: token ids, [CLS] A [SEP] (B [SEP]).
        tokens: the WordPiece strings of `ids`.
        type_ids: segment ids, 0 for [CLS] A [SEP], 1 for B [SEP].
        offsets: (start, end) character span of each token in its own text; (0, 0) for specials.
        word_ids: index of the word each token belongs to (None for specials).
        sequence_ids: 0 / 1 for tokens of text A / B, None for specials.
        truncated: True when tokens were cut to fit `max_length`.
        num_dropped: how many tokens were cut.
    """

    ids: list[int]
    tokens: list[str]
    type_ids: list[int]
    offsets: list[tuple[int, int]]
    word_ids: list[int | None]
    sequence_ids: list[int | None]
    truncated: bool = False
    num_dropped: int = 0
    special_mask: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.ids)

    def word_positions(self) -> list[list[int]]:
        """The token positions of each word of a one-text encoding, in order ('walking' -> its two pieces'
        positions; [CLS] and [SEP] are no words)."""
        spans: dict[int, list[int]] = {}
        for p, wid in enumerate(self.word_ids):
            if wid is not None:
                spans.setdefault(wid, []).append(p)
        return list(spans.values())


def _build(vocab: dict[str, int], lowercase: bool) -> Tokenizer:
    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=lowercase
    )
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece(prefix="##")
    _finish(tok)
    return tok


def _finish(tok: Tokenizer) -> None:
    """Register specials (so "[MASK]" typed in text stays one token) and the [CLS]/[SEP] template."""
    vocab = tok.get_vocab()
    missing = [t for t in SPECIAL_TOKENS if t not in vocab]
    if missing:
        raise CheckpointError(
            f"vocabulary lacks the special tokens {missing}; a BERT vocab.txt needs all of {SPECIAL_TOKENS}"
        )
    tok.add_special_tokens(list(SPECIAL_TOKENS))
    cls_id, sep_id = vocab["[CLS]"], vocab["[SEP]"]
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    tok.no_truncation()
    tok.no_padding()


def read_vocab(path: str | Path) -> dict[str, int]:
    """Read a `vocab.txt` (one token a line, line number = id)."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{path}: vocabulary file not found")
    vocab: dict[str, int] = {}
    try:
        with open(path, encoding="utf-8") as f:
            for i, line in enumerate(f):
                token = line.rstrip("\n")
                if token in vocab:
                    continue  # Google's vocabs have no duplicates; keep the first if one does
                vocab[token] = i
    except UnicodeDecodeError as exc:
        raise CheckpointError(
            f"{path}: is not UTF-8 text (byte {exc.object[exc.start]:#04x} after line {len(vocab)}); "
            "a vocab.txt is one UTF-8 token a line: re-save it as UTF-8"
        ) from None
    if not vocab:
        raise CheckpointError(f"{path}: vocabulary file is empty")
    return vocab


def read_tokenizer_json(path: str | Path) -> tuple[dict[str, int], bool | None]:
    """The WordPiece vocabulary and casing of a `tokenizer.json` (what transformers 5 and many Hub
    repos ship instead of `vocab.txt`); casing None when the file does not say."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"{path}: cannot be read as JSON ({exc})") from exc
    model = data.get("model") if isinstance(data, dict) else None
    if not isinstance(model, dict) or model.get("type") != "WordPiece" or not isinstance(model.get("vocab"), dict):
        raise CheckpointError(f"{path}: not a WordPiece tokenizer (BERT's); its model is {(model or {}).get('type')!r}")
    vocab = {str(t): int(i) for t, i in model["vocab"].items()}

    def lowercase_of(node) -> bool | None:
        if isinstance(node, dict):
            if node.get("type") == "BertNormalizer":
                return bool(node.get("lowercase", True))
            if node.get("type") == "Lowercase":
                return True
            for child in node.get("normalizers") or []:
                found = lowercase_of(child)
                if found is not None:
                    return found
        return None

    return vocab, lowercase_of(data.get("normalizer"))


def guess_lowercase(vocab: dict[str, int]) -> bool:
    """Uncased vocabularies hold no upper-case letters outside the special tokens."""
    # ASCII only: uncased vocabularies still hold a few non-ASCII capitals (e.g. Greek letters)
    return not any(
        "A" <= ch <= "Z" for tok in vocab if tok not in SPECIAL_TOKENS and not tok.startswith("[unused") for ch in tok
    )


class BertTokenizer:
    """BERT's WordPiece tokenizer (basic tokenization + WordPiece), backed by Rust `tokenizers`."""

    # the special tokens by role; a subclass for another family names its own (RoBERTa's <s>, </s>, ...)
    pad_token, unk_token, cls_token, sep_token, mask_token = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"

    def __init__(self, tokenizer: Tokenizer, lowercase: bool, model_max_length: int = 512):
        self._tok = tokenizer
        self.lowercase = lowercase
        self.model_max_length = model_max_length
        self.vocab = tokenizer.get_vocab()
        self.id_to_token = {i: t for t, i in self.vocab.items()}
        self.pad_id = self.vocab[self.pad_token]
        self.unk_id = self.vocab[self.unk_token]
        self.cls_id = self.vocab[self.cls_token]
        self.sep_id = self.vocab[self.sep_token]
        self.mask_id = self.vocab[self.mask_token]
        self.special_ids = {self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id}

    # --- construction -------------------------------------------------------------------
    @classmethod
    def from_vocab(cls, path: str | Path, lowercase: bool | None = None, model_max_length: int = 512) -> BertTokenizer:
        """Load a BERT `vocab.txt`; `lowercase` None guesses from the vocabulary (cased / uncased)."""
        vocab = read_vocab(path)
        if lowercase is None:
            lowercase = guess_lowercase(vocab)
        return cls(_build(vocab, lowercase), lowercase, model_max_length)

    @classmethod
    def from_dir(cls, directory: str | Path, model_max_length: int | None = None) -> BertTokenizer:
        """Load from a checkpoint directory: `vocab.txt` (or, without it, the WordPiece vocabulary in
        `tokenizer.json`) plus `tokenizer_config.json` when present."""
        directory = Path(directory)
        lowercase = None
        max_len = 512
        cfg_path = directory / "tokenizer_config.json"
        if cfg_path.is_file():
            try:
                cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise CheckpointError(f"{cfg_path}: not valid JSON ({exc})") from exc
            lowercase = cfg.get("do_lower_case", None)
            ml = cfg.get("model_max_length")
            if isinstance(ml, int) and 0 < ml < 100_000:
                max_len = ml
        if model_max_length is not None:
            max_len = min(max_len, model_max_length)
        if (directory / "vocab.txt").is_file():
            return cls.from_vocab(directory / "vocab.txt", lowercase, max_len)
        if (directory / "tokenizer.json").is_file():  # transformers 5 writes no vocab.txt
            vocab, json_lowercase = read_tokenizer_json(directory / "tokenizer.json")
            if lowercase is None:
                lowercase = json_lowercase if json_lowercase is not None else guess_lowercase(vocab)
            return cls(_build(vocab, lowercase), lowercase, max_len)
        raise CheckpointError(f"{directory}: no vocab.txt or tokenizer.json; a BERT checkpoint folder needs one")

    @classmethod
    def train(
        cls,
        files: Sequence[str | Path] | None = None,
        vocab_size: int = 8000,
        lowercase: bool = True,
        min_frequency: int = 2,
        texts: Iterable[str] | None = None,
        limit_alphabet: int = 1000,
    ) -> BertTokenizer:
        """Train a new WordPiece vocabulary from text files or an iterator of strings.

        Note: `tokenizers` training is not bit-for-bit deterministic across runs; train once and
        keep the resulting `vocab.txt` (save with `save_vocab`).
        """
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
        tok.normalizer = normalizers.BertNormalizer(
            clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=lowercase
        )
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece(prefix="##")
        trainer = WordPieceTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=list(SPECIAL_TOKENS),
            limit_alphabet=limit_alphabet,
            continuing_subword_prefix="##",
            show_progress=False,
        )
        train_on(tok, trainer, files, texts)
        # Reorder so the specials come first as in BERT vocabularies ([PAD]=0).
        vocab = tok.get_vocab()
        ordered = list(SPECIAL_TOKENS) + sorted((t for t in vocab if t not in SPECIAL_TOKENS), key=vocab.get)
        return cls(_build({t: i for i, t in enumerate(ordered)}, lowercase), lowercase)

    # --- saving -------------------------------------------------------------------------
    def save(self, directory: str | Path) -> None:
        """Write `vocab.txt`, `tokenizer_config.json`, `special_tokens_map.json`, `tokenizer.json`."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.save_vocab(directory / "vocab.txt")
        (directory / "tokenizer_config.json").write_text(
            json.dumps(
                {
                    "tokenizer_class": "BertTokenizer",
                    "do_lower_case": self.lowercase,
                    "model_max_length": self.model_max_length,
                    "unk_token": "[UNK]",
                    "sep_token": "[SEP]",
                    "pad_token": "[PAD]",
                    "cls_token": "[CLS]",
                    "mask_token": "[MASK]",
                    "tokenize_chinese_chars": True,
                    "strip_accents": None,
                },
                indent=2,
            ),
            encoding="utf-8",
        )
        (directory / "special_tokens_map.json").write_text(
            json.dumps(
                {
                    "unk_token": "[UNK]",
                    "sep_token": "[SEP]",
                    "pad_token": "[PAD]",
                    "cls_token": "[CLS]",
                    "mask_token": "[MASK]",
                },
                indent=2,
            ),
            encoding="utf-8",
        )
        self._tok.save(str(directory / "tokenizer.json"))

    def save_vocab(self, path: str | Path) -> None:
        """Write vocab.txt atomically (a temp file, fsynced, then renamed), so a kill never leaves half a vocabulary."""
        ordered = sorted(self.vocab, key=self.vocab.get)
        write_text_atomic(path, "".join(t + "\n" for t in ordered))

    # --- encoding -----------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.vocab)

    def _convert(self, enc, max_length: int | None) -> Encoding:
        return Encoding(
            ids=list(enc.ids),
            tokens=list(enc.tokens),
            type_ids=list(enc.type_ids),
            offsets=[tuple(o) for o in enc.offsets],
            word_ids=list(enc.word_ids),
            sequence_ids=list(enc.sequence_ids),
            special_mask=list(enc.special_tokens_mask),
        )

    def encode(
        self, text: str, text_b: str | None = None, max_length: int | None = None, truncate: bool = True
    ) -> Encoding:
        """Encode `text` (and `text_b`) as [CLS] A [SEP] (B [SEP]).

        Args:
            max_length: at most this many tokens, specials included; defaults to `model_max_length`.
            truncate: cut the longer side first when too long (setting `truncated`), or raise
                InputError when False.
        """
        return self.encode_batch([text], None if text_b is None else [text_b], max_length, truncate)[0]

    def encode_batch(
        self,
        texts: Sequence[str],
        texts_b: Sequence[str] | None = None,
        max_length: int | None = None,
        truncate: bool = True,
    ) -> list[Encoding]:
        """Encode many inputs at once (parallel in Rust); see `encode`."""
        for t in texts:
            if not isinstance(t, str):
                raise InputError(f"text must be a string, got {type(t).__name__}")
        max_length = max_length or self.model_max_length
        if texts_b is not None:
            if len(texts_b) != len(texts):
                raise InputError(f"{len(texts)} first sentences but {len(texts_b)} second sentences")
            pairs = [(mask_any_case(a), mask_any_case(b)) for a, b in zip(texts, texts_b, strict=True)]
            raw = self._tok.encode_batch(pairs, add_special_tokens=True)
        else:
            raw = self._tok.encode_batch([mask_any_case(t) for t in texts], add_special_tokens=True)
        out = []
        for enc in raw:
            e = self._convert(enc, max_length)
            if len(e.ids) > max_length:
                if not truncate:
                    raise InputError(f"input is {len(e.ids)} tokens long; this model accepts at most {max_length}")
                e = self._truncate(e, max_length)
            out.append(e)
        return out

    def _truncate(self, e: Encoding, max_length: int) -> Encoding:
        """Longest-first truncation from the end of each segment, keeping the special tokens."""
        seq = e.sequence_ids
        idx_a = [i for i, s in enumerate(seq) if s == 0]
        idx_b = [i for i, s in enumerate(seq) if s == 1]
        n_special = len(e.ids) - len(idx_a) - len(idx_b)
        budget = max_length - n_special
        if budget < 0:
            raise InputError(f"max_length {max_length} leaves no room for the text")
        while len(idx_a) + len(idx_b) > budget:
            if len(idx_a) >= len(idx_b):
                idx_a.pop()
            else:
                idx_b.pop()
        keep = set(idx_a) | set(idx_b) | {i for i, s in enumerate(seq) if s is None}
        pick = [i for i in range(len(e.ids)) if i in keep]

        def take(values):
            return [values[i] for i in pick]

        return Encoding(
            ids=take(e.ids),
            tokens=take(e.tokens),
            type_ids=take(e.type_ids),
            offsets=take(e.offsets),
            word_ids=take(e.word_ids),
            sequence_ids=take(e.sequence_ids),
            special_mask=take(e.special_mask),
            truncated=True,
            num_dropped=len(e.ids) - len(pick),
        )

    def tokenize(self, text: str) -> list[str]:
        """WordPiece strings of `text`, without [CLS]/[SEP]."""
        return self._tok.encode(text, add_special_tokens=False).tokens

    def tokenize_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids (no specials) of many texts at once; the fast path for pretraining data."""
        return [e.ids for e in self._tok.encode_batch(list(texts), add_special_tokens=False)]

    def tokenize_words(self, words: Sequence[str]) -> list[list[int]]:
        """Token ids (no specials) of each word of a sentence given already split into words (a tagging
        task's), each as it reads inside the sentence. WordPiece reads a word the same wherever it
        stands; a family whose pieces carry the space before a word (RoBERTa's 'Ġ') overrides this."""
        return self.tokenize_batch(words)

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> list[str]:
        return [self.id_to_token.get(int(i), self.unk_token) for i in ids]

    def convert_tokens_to_ids(self, tokens: Iterable[str]) -> list[int]:
        return [self.vocab.get(t, self.unk_id) for t in tokens]

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = True) -> str:
        return self._tok.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def readable_tokens(self, tokens: Sequence[str]) -> list[str]:
        """Tokens as a page draws them: WordPiece's read as they are ('##s' continues a word). Every page,
        figure and table that shows tokens to a learner goes through this; a family whose vocabulary
        spells pieces in its own alphabet overrides it (RoBERTa's 'Ġmat' reads '␣mat')."""
        return list(tokens)

    # --- answers as words: the vocabulary's own rule for where a word starts --------------
    # Another family's tokenizer overrides these three (RoBERTa's byte-level BPE: 'Ġ' starts a word);
    # here they are WordPiece's module functions below, where a ## piece continues the word on its left.
    def whole_word(self, tokens: Sequence[str], position: int, token: str, attached: bool | None = None) -> str:
        """The word `token` forms at `position` of `tokens` with its neighbours (see `whole_word`)."""
        return whole_word(tokens, position, token, attached)

    def attached_to_left(self, enc: Encoding, position: int) -> bool:
        """Whether `position` continued the word on its left as the user typed it (see `attached_to_left`)."""
        return attached_to_left(enc, position)

    def fill_text(self, text: str, enc: Encoding, positions: Sequence[int], tokens: Sequence[str]) -> str:
        """`text` with the mask at each of `positions` replaced by a token (see `fill_text`)."""
        return fill_text(text, enc, positions, tokens)


def train_on(tok: Tokenizer, trainer: Any, files: Sequence[str | Path] | None, texts: Iterable[str] | None) -> None:
    """Train `tok` with `trainer` on `texts` (an iterable of strings) or else on `files`.

    Raises:
        InputError: neither was given.
    """
    if texts is not None:
        tok.train_from_iterator(texts, trainer=trainer)
    elif files:
        tok.train([str(f) for f in files], trainer=trainer)
    else:
        raise InputError("train a tokenizer from `files` or `texts`; neither was given")


# --------------------------------------------------------------------------------------
# Words from WordPieces: how an answer reads in the text the user typed
# --------------------------------------------------------------------------------------
def whole_word(tokens: Sequence[str], position: int, token: str, attached: bool | None = None) -> str:
    """The word `token` forms at `position` with the ## pieces around it.

    A `##` answer is glued to the word on its left only where the position was already inside
    a word (`attached`): a ## piece of a word the user typed ('cat ##s' -> '##z' gives 'catz'),
    a [MASK] typed against the word before it ('cat[MASK]'), or a [MASK] right after another
    [MASK] (whole-word masking: 'play' + '##ing' gives 'playing'). Elsewhere the model proposes a
    sub-word piece for a position that stands as its own word, and gluing it would make up a word
    ('is' + '##s' -> 'iss'): it is shown as what it is, 'is + ##s'.

    Args:
        attached: whether the position continues the word on its left as typed; None reads it
            from `tokens` (True only when `tokens[position]` is itself a ## piece).
    """
    if attached is None:
        attached = tokens[position].startswith("##")
    left = ""
    if token.startswith("##"):
        i = position - 1
        while i > 0 and tokens[i].startswith("##"):
            left = tokens[i][2:] + left
            i -= 1
        if i > 0 and tokens[i] not in ("[CLS]", "[SEP]", "[MASK]"):
            left = tokens[i] + left
    right = ""
    j = position + 1
    while j < len(tokens) and tokens[j].startswith("##"):
        right += tokens[j][2:]
        j += 1
    if left and not attached:
        return f"{left} + {token}{right}"
    core = token[2:] if token.startswith("##") else token
    return left + core + right


def attached_to_left(enc: Encoding, position: int) -> bool:
    """Whether the token at `position` continues the word on its left as the user typed it: a ##
    piece, a token typed with no space after the previous one ('cat[MASK]'), or a [MASK] after a
    [MASK] (one masked word). See `whole_word`."""
    p = position
    if p <= 0 or enc.sequence_ids[p] is None or enc.sequence_ids[p - 1] != enc.sequence_ids[p]:
        return False
    if enc.tokens[p].startswith("##") or enc.tokens[p - 1] == "[MASK]":
        return True
    return enc.offsets[p - 1][1] == enc.offsets[p][0]


def fill_text(text: str, enc: Encoding, positions: Sequence[int], tokens: Sequence[str]) -> str:
    """`text` as the user typed it, with the [MASK] at each token position replaced by a token.

    A `##` piece joins the word before it where the [MASK] was inside a word ("cat[MASK]" +
    "##s" -> "cats"; "[MASK] [MASK]" + "play", "##ing" -> "playing"); after a word typed on its
    own it is shown as a piece ("is [MASK]" + "##s" -> "is + ##s", not "iss"; see `whole_word`).
    When the input was truncated, the part of `text` the model never read is dropped.
    """
    end = len(text)
    if enc.truncated:
        end = max((stop for (_, stop), seq in zip(enc.offsets, enc.sequence_ids, strict=True) if seq == 0), default=0)
    out = text[:end]
    for p, token in sorted(zip(positions, tokens, strict=True), reverse=True):
        start, stop = enc.offsets[p]
        left = out[:start]
        if token.startswith("##"):
            if attached_to_left(enc, p) or p - 1 in positions:
                left, token = left.rstrip(), token[2:]
            else:
                left, token = left.rstrip(), " + " + token
        elif left and left[-1].isalnum():
            token = " " + token  # "cat[MASK]" typed without a space
        out = left + token + out[stop:]
    return out


def _kind(ch: str) -> str:
    """The character classes GPT-2's byte-level pre-tokenizer keeps together: letters, digits, spaces, other."""
    return "letter" if ch.isalpha() else "digit" if ch.isnumeric() else "space" if ch.isspace() else "other"


class WordStartPieces:
    """What a tokenizer whose pieces mark a word's start (RoBERTa's byte-level 'Ġ', SentencePiece's '▁')
    shares: where a typed mask touched its left neighbour, and a filled-in text spelled as the user typed it.
    The class sets `word_start` and `_specials`; `piece_text`, `mask_token` and `cls_token` are its own."""

    word_start = ""

    def _joins(self, left: str, token: str) -> bool:
        """Whether `token` continues the word that `left` (the token before it) is part of: no word-start
        mark in front, neither a special token, and the same kind of character on both sides of the seam,
        as the byte-level pre-tokenizer groups them ('mat' '.' reads 'mat', a lone mark starts the word after it)."""
        if token.startswith(self.word_start) or left in self._specials or token in self._specials:
            return False
        before, after = self.piece_text(left), self.piece_text(token)
        if not before or not after:
            return False
        if before == " ":
            return not after[0].isspace()
        return _kind(before[-1]) == _kind(after[0])

    def attached_to_left(self, enc: Encoding, position: int) -> bool:
        """Whether the token at `position` was typed against the one on its left (no space between:
        'cat[MASK]'), or is a mask after a mask (one masked word, as mask_words writes it)."""
        p = position
        if p <= 0 or enc.sequence_ids[p] is None or enc.sequence_ids[p - 1] != enc.sequence_ids[p]:
            return False
        if enc.tokens[p - 1] == self.mask_token:
            return True
        return enc.offsets[p - 1][1] == enc.offsets[p][0]

    def fill_text(self, text: str, enc: Encoding, positions: Sequence[int], tokens: Sequence[str]) -> str:
        """`text` as the user typed it, with the mask at each token position replaced by a token: a
        token that starts a word (RoBERTa's 'Ġmat', SentencePiece's '▁mat') as a word of its own ("the
        [MASK]" -> "the mat"; "cat[MASK]" + 'Ġsat' -> "cat sat"), a piece that continues the word on its
        left glued to it where the mask was inside a word ("cat[MASK]" + 's' -> "cats") and shown as a
        piece elsewhere ("the + s"), any other token where the mask was ("the [MASK]" + '.' -> "the .").
        Text cut off by truncation is dropped.
        """
        end = len(text)
        if enc.truncated:
            end = max(
                (stop for (_, stop), seq in zip(enc.offsets, enc.sequence_ids, strict=True) if seq == 0), default=0
            )
        out = text[:end]
        chosen = dict(zip(positions, tokens, strict=True))
        for p, token in sorted(chosen.items(), reverse=True):
            start, stop = enc.offsets[p]
            left, word = out[:start], self.piece_text(token)
            before = chosen.get(p - 1, enc.tokens[p - 1] if p > 0 else self.cls_token)
            if token.startswith(self.word_start):
                word = word.lstrip()
                if left and not left[-1].isspace():
                    word = " " + word  # the model starts a word where the user typed none
            elif self._joins(before, token):
                if self.attached_to_left(enc, p) or p - 1 in chosen:
                    left = left.rstrip()
                else:
                    left, word = left.rstrip(), " + " + word
            out = left + word + out[stop:]
        return out
