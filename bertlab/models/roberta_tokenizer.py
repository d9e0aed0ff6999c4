"""Byte-level BPE, RoBERTa's tokenizer (Liu et al. 2019, §4.4), trained and read with `tokenizers`.

Owns: training a byte-level BPE vocabulary (GPT-2's and RoBERTa's: the 256 bytes are the base
symbols, so no text is ever unknown), its files as transformers' `RobertaTokenizer` reads them
(vocab.json + merges.txt, and tokenizer.json), RoBERTa's special tokens and ids (<s>=0, <pad>=1,
</s>=2, <unk>=3, <mask> last), and inputs as RoBERTa builds them: <s> A </s>, pairs
<s> A </s></s> B </s>, one segment (type ids all 0).

`RobertaTokenizer` subclasses bertlab.tokenizer.BertTokenizer, so that the encoding, truncation,
word ids and offsets are the same code and the inference API, the data pipeline and the pages take
either. A "[MASK]" the user types (any case) reads as <mask>: the same length, so offsets hold.
An answer reads as a word by the byte-level rule (`whole_word`, `fill_text`): 'Ġ' (a space byte)
starts a word, and a piece without it continues the word on its left, as the pre-tokenizer split
it (letters with letters, digits with digits); a fill-mask answer 'Ġmat' reads 'mat'.

Cased, as RoBERTa's: a byte-level vocabulary holds both cases, and transformers' RobertaTokenizer,
which reads these files, has no lower-casing to match.

Imports `tokenizers`, bertlab.atomic, bertlab.errors and bertlab.tokenizer; no torch.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors
from tokenizers.trainers import BpeTrainer

from bertlab.atomic import write_text_atomic
from bertlab.errors import CheckpointError, InputError
from bertlab.tokenizer import BertTokenizer, Encoding, WordStartPieces, train_on

VOCAB_JSON, MERGES_TXT, TOKENIZER_JSON = "vocab.json", "merges.txt", "tokenizer.json"
SPECIAL_TOKENS = ("<s>", "<pad>", "</s>", "<unk>")  # ids 0-3, RoBERTa's order; <mask> is added last
MASK_TOKEN = "<mask>"
_MASK_ANY_CASE = re.compile(r"\[mask\]", re.IGNORECASE)
_SPACE = "Ġ"  # the byte-level alphabet's space: a token that starts with it starts a word
VISIBLE_SPACE = "␣"  # how a page draws a piece's leading space (readable_tokens)
# what a page draws for the other white space a piece can spell: 'Ċ' (a newline byte) would otherwise
# reach the page as a line break that HTML and markdown fold away
_VISIBLE_WHITESPACE = str.maketrans({" ": VISIBLE_SPACE, "\n": "↵", "\r": "␍", "\t": "⇥"})


def _byte_alphabet() -> dict[str, int]:
    """GPT-2's byte-level alphabet: the character that stands for each of the 256 bytes (a printable
    byte as itself, the others shifted past 255 in order: a space, byte 32, is 'Ġ', a newline 'Ċ')."""
    printable = {*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)}
    alphabet, shifted = {}, 0
    for byte in range(256):
        if byte in printable:
            alphabet[chr(byte)] = byte
        else:
            alphabet[chr(256 + shifted)] = byte
            shifted += 1
    return alphabet


_BYTE_OF = _byte_alphabet()


def _spelled(pieces: str) -> str:
    """The text that byte-level pieces (one, or several run together) spell, a byte that is only part of
    a character shown as '<0xC3>' (the first half of 'é'; `piece_text` would give '�', the same for every
    such byte), and so is a control character other than a tab or a line break, which draws as nothing."""
    if not all(ch in _BYTE_OF for ch in pieces):
        return pieces
    data, out = bytes(_BYTE_OF[ch] for ch in pieces), []
    while data:
        try:
            out.append(data.decode("utf-8"))
            break
        except UnicodeDecodeError as err:
            out.append(data[: err.start].decode("utf-8"))
            out.extend(f"<0x{byte:02X}>" for byte in data[err.start : err.end])
            data = data[err.end :]
    return "".join(f"<0x{ord(ch):02X}>" if _is_control(ch) else ch for ch in "".join(out))


def _is_control(ch: str) -> bool:
    return (ord(ch) < 0x20 and ch not in "\t\n\r") or ord(ch) == 0x7F


def _build(vocab: dict[str, int], merges: list[tuple[str, str]]) -> Tokenizer:
    """transformers' RobertaTokenizer pipeline over `vocab` and `merges`: byte-level BPE without a
    prefix space, offsets trimmed to the word (not its leading space), <mask> taking the space
    before it (lstrip, as roberta-base's), so that "the <mask>" predicts "Ġmat" as one word."""
    missing = [t for t in (*SPECIAL_TOKENS, MASK_TOKEN) if t not in vocab]
    if missing:
        raise CheckpointError(
            f"the BPE vocabulary lacks the special tokens {missing}; RoBERTa's needs <s> <pad> </s> <unk> <mask>"
        )
    tok = Tokenizer(
        models.BPE(vocab=vocab, merges=merges, continuing_subword_prefix="", end_of_word_suffix="", fuse_unk=False)
    )
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(
        [AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS]
        + [AddedToken(MASK_TOKEN, lstrip=True, special=True, normalized=False)]
    )
    tok.post_processor = processors.RobertaProcessing(
        ("</s>", vocab["</s>"]), ("<s>", vocab["<s>"]), trim_offsets=True, add_prefix_space=False
    )
    return tok


def _merges_of(tokenizer: Tokenizer) -> list[tuple[str, str]]:
    """The BPE merges, in rank order, of a tokenizer whose model is BPE."""
    model = json.loads(tokenizer.to_str())["model"]
    return [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"]]


def read_bpe_files(vocab_path: str | Path, merges_path: str | Path) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """vocab.json and merges.txt (GPT-2's and RoBERTa's format) as a vocabulary and merges.

    Raises:
        CheckpointError: a file is missing or unreadable.
    """
    vocab_path, merges_path = Path(vocab_path), Path(merges_path)
    for path in (vocab_path, merges_path):
        if not path.is_file():
            raise CheckpointError(f"{path}: not found; a byte-level BPE tokenizer needs {VOCAB_JSON} and {MERGES_TXT}")
    try:
        vocab, merges = models.BPE.read_file(str(vocab_path), str(merges_path))
    except Exception as exc:  # the Rust reader raises a bare Exception for every malformed file
        raise CheckpointError(f"{vocab_path} / {merges_path}: cannot be read as BPE files ({exc})") from None
    return vocab, merges


def read_bpe_tokenizer_json(path: str | Path) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """The BPE vocabulary (with its added tokens) and merges of a `tokenizer.json` (what transformers 5
    and Hub repos ship beside or instead of vocab.json and merges.txt)."""
    path = Path(path)
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # the Rust reader raises a bare Exception for every malformed file
        raise CheckpointError(f"{path}: cannot be read as a tokenizer ({exc})") from None
    if not isinstance(tokenizer.model, models.BPE):
        raise CheckpointError(f"{path}: not a BPE tokenizer (RoBERTa's); its model is {type(tokenizer.model).__name__}")
    return tokenizer.get_vocab(with_added_tokens=True), _merges_of(tokenizer)


class RobertaTokenizer(WordStartPieces, BertTokenizer):
    """RoBERTa's byte-level BPE with BertTokenizer's interface (see the module docstring)."""

    pad_token, unk_token, cls_token, sep_token, mask_token = "<pad>", "<unk>", "<s>", "</s>", MASK_TOKEN
    word_start = _SPACE

    def __init__(self, tokenizer: Tokenizer, lowercase: bool = False, model_max_length: int = 512):
        if lowercase:
            raise InputError("a byte-level BPE tokenizer is cased, as RoBERTa's; set lowercase=false")
        super().__init__(tokenizer, lowercase=False, model_max_length=model_max_length)
        self._specials = frozenset((*SPECIAL_TOKENS, MASK_TOKEN))

    # --- construction -------------------------------------------------------------------
    @classmethod
    def from_vocab(
        cls, path: str | Path, lowercase: bool | None = None, model_max_length: int = 512
    ) -> RobertaTokenizer:
        """Load `vocab.json` at `path` and the `merges.txt` beside it (`lowercase` must be None or False)."""
        path = Path(path)
        vocab, merges = read_bpe_files(path, path.with_name(MERGES_TXT))
        return cls(_build(vocab, merges), bool(lowercase), model_max_length)

    @classmethod
    def from_dir(cls, directory: str | Path, model_max_length: int | None = None) -> RobertaTokenizer:
        """Load from a checkpoint folder: vocab.json + merges.txt, or without them tokenizer.json;
        the longest input from `tokenizer_config.json` when it says, capped at `model_max_length`."""
        directory = Path(directory)
        max_len = 512
        cfg_path = directory / "tokenizer_config.json"
        if cfg_path.is_file():
            try:
                ml = json.loads(cfg_path.read_text(encoding="utf-8")).get("model_max_length")
            except json.JSONDecodeError as exc:
                raise CheckpointError(f"{cfg_path}: not valid JSON ({exc})") from exc
            if isinstance(ml, int) and 0 < ml < 100_000:
                max_len = ml
        if model_max_length is not None:
            max_len = min(max_len, model_max_length)
        if (directory / VOCAB_JSON).is_file() and (directory / MERGES_TXT).is_file():
            return cls.from_vocab(directory / VOCAB_JSON, model_max_length=max_len)
        if (directory / TOKENIZER_JSON).is_file():
            return cls(_build(*read_bpe_tokenizer_json(directory / TOKENIZER_JSON)), False, max_len)
        raise CheckpointError(
            f"{directory}: no {VOCAB_JSON} + {MERGES_TXT} or {TOKENIZER_JSON}; a RoBERTa checkpoint folder needs one"
        )

    @classmethod
    def train(
        cls,
        files: Sequence[str | Path] | None = None,
        vocab_size: int = 8192,
        lowercase: bool = False,
        min_frequency: int = 2,
        texts: Iterable[str] | None = None,
    ) -> RobertaTokenizer:
        """Train a byte-level BPE vocabulary of `vocab_size` tokens, <mask> included, from text files
        or an iterator of strings (BertTokenizer.train's arguments; `lowercase` must be False).

        Note: `tokenizers` training is not bit-for-bit deterministic across runs (ties between
        equally frequent pairs); train once and keep the files (`save_vocab`).
        """
        if lowercase:
            raise InputError("a byte-level BPE tokenizer is cased, as RoBERTa's; set lowercase=false")
        if vocab_size <= len(SPECIAL_TOKENS) + 1 + 256:
            raise InputError(f"vocab_size {vocab_size} leaves no room for merges beyond the 256 bytes and 5 specials")
        tok = Tokenizer(models.BPE(continuing_subword_prefix="", end_of_word_suffix="", fuse_unk=False))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        trainer = BpeTrainer(
            vocab_size=vocab_size - 1,  # <mask> comes last, as in RoBERTa's vocabulary
            min_frequency=min_frequency,
            special_tokens=list(SPECIAL_TOKENS),
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # every byte, seen or not
            show_progress=False,
        )
        train_on(tok, trainer, files, texts)
        vocab = tok.get_vocab()
        vocab[MASK_TOKEN] = len(vocab)
        return cls(_build(vocab, _merges_of(tok)))

    # --- saving -------------------------------------------------------------------------
    def save(self, directory: str | Path) -> None:
        """Write vocab.json, merges.txt, tokenizer.json, tokenizer_config.json and
        special_tokens_map.json, as transformers' RobertaTokenizer writes and reads them."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.save_vocab(directory / VOCAB_JSON)
        specials = {
            "bos_token": "<s>",
            "eos_token": "</s>",
            "sep_token": "</s>",
            "cls_token": "<s>",
            "unk_token": "<unk>",
            "pad_token": "<pad>",
            "mask_token": MASK_TOKEN,
        }
        added = {
            str(self.vocab[t]): {
                "content": t,
                "lstrip": t == MASK_TOKEN,
                "normalized": False,
                "rstrip": False,
                "single_word": False,
                "special": True,
            }
            for t in (*SPECIAL_TOKENS, MASK_TOKEN)
        }
        config = {
            "tokenizer_class": "RobertaTokenizer",
            "model_max_length": self.model_max_length,
            "add_prefix_space": False,
            "trim_offsets": True,
            "errors": "replace",
            "added_tokens_decoder": added,
            **specials,
        }
        (directory / "tokenizer_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
        (directory / "special_tokens_map.json").write_text(json.dumps(specials, indent=2), encoding="utf-8")
        self._tok.save(str(directory / TOKENIZER_JSON))

    def save_vocab(self, path: str | Path) -> None:
        """Write vocab.json at `path` and merges.txt beside it, each atomically, the merges first: a
        vocab.json that exists always has its merges (prepare_tokenizer keeps a run's by that file)."""
        path = Path(path)
        merges = _merges_of(self._tok)
        write_text_atomic(path.with_name(MERGES_TXT), "#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
        ordered = dict(sorted(self.vocab.items(), key=lambda item: item[1]))
        write_text_atomic(path, json.dumps(ordered, ensure_ascii=False))

    # --- encoding -----------------------------------------------------------------------
    def encode_batch(
        self,
        texts: Sequence[str],
        texts_b: Sequence[str] | None = None,
        max_length: int | None = None,
        truncate: bool = True,
    ) -> list[Encoding]:
        """As BertTokenizer's, with "[MASK]" (any case) read as <mask>; pairs are <s> A </s></s> B </s>."""

        def masks(texts: Sequence[str] | None) -> list[str] | None:
            if texts is None:
                return None
            return [_MASK_ANY_CASE.sub(MASK_TOKEN, t) if isinstance(t, str) and "[" in t else t for t in texts]

        return super().encode_batch(masks(texts), masks(texts_b), max_length, truncate)

    def tokenize_words(self, words: Sequence[str]) -> list[list[int]]:
        """Token ids (no specials) of each word of a sentence given already split into words, each with the
        space that stands before it in the sentence ('cat' -> 'Ġcat'), the first word too: transformers'
        RobertaTokenizerFast(add_prefix_space=True) on is_split_into_words input, which RoBERTa's tagging
        recipes use. Alone, 'cat' would read as the pieces of a word glued to the one before it."""
        return self.tokenize_batch([w if w.startswith(" ") else " " + w for w in words])

    # --- answers as words ----------------------------------------------------------------
    def piece_text(self, token: str) -> str:
        """What a vocabulary string spells: 'Ġmat' -> ' mat', 'Ã©' -> 'é' (the bytes it stands for)."""
        return self._tok.decoder.decode([token])

    def readable_tokens(self, tokens: Sequence[str]) -> list[str]:
        """Tokens as a page draws them: the text each piece spells, a word's leading space shown as '␣'
        and a newline as '↵' ('Ġmat' -> '␣mat', 'Ċ' -> '↵', 'Ã©' -> 'é'), a byte that is only part of
        a character as its value ('Ã' -> '<0xC3>'), special tokens as they are."""
        return [t if t in self._specials else _spelled(t).translate(_VISIBLE_WHITESPACE) for t in tokens]

    def whole_word(self, tokens: Sequence[str], position: int, token: str, attached: bool | None = None) -> str:
        """The word `token` forms at `position` with the pieces around it that continue it ('Ġcat'
        before 's' -> 'cats'). A piece without 'Ġ' joins the word on its left only where the position
        was inside a word as typed (`attached`: 'cat[MASK]', or a [MASK] after a [MASK]); elsewhere it
        reads 'the + mat', as WordPiece's 'is + ##s' (bertlab.tokenizer.whole_word).

        Args:
            attached: whether the position continues the word on its left as typed; None reads it
                from `tokens` (True when `tokens[position]` itself continues its left neighbour).
        """
        if attached is None:
            attached = position > 0 and self._joins(tokens[position - 1], tokens[position])
        # the pieces are spelled together, not one by one: 'Ã' + '©' is 'é', each alone half of it
        left, i, piece = "", position, token
        while i > 0 and self._joins(tokens[i - 1], piece):
            i -= 1
            piece = tokens[i]
            left = piece + left
        right, j, piece = "", position + 1, token
        while j < len(tokens) and self._joins(piece, tokens[j]):
            piece = tokens[j]
            right += piece
            j += 1
        if left and not attached:
            return f"{_spelled(left).strip()} + {_spelled(token + right)}"
        return _spelled(left + token + right).strip()

    def _convert(self, enc, max_length: int | None) -> Encoding:
        e = super()._convert(enc, max_length)
        # the vocabulary's own strings: <mask> matched with the space before it reads " <mask>" in `enc.tokens`
        e.tokens = self.convert_ids_to_tokens(e.ids)
        return e
