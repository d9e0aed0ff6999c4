"""Helpers for exploring a model by hand: masking words, checking inputs, ready-made examples.

Owns what the app's pages (and the CLI or a notebook) need between a user's text and the
inference API: splitting text into clickable words and masking them (one [MASK] per WordPiece,
as whole-word masking does), plain-language notes about an input (words the vocabulary does not
know, where a too-long input was cut), and example sentences for fill-mask and next sentence
prediction; what a model's card says about its limits, what the embeddings row of the layer-by-layer
guesses means, and how many tokens a pretraining example chooses for the masked LM. Imports
bertlab.tokenizer, bertlab.errors, bertlab.storage.model_card, bertlab.data.pretraining_data and bertlab.inference
(result types); never streamlit.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from bertlab.data.data_config import DataConfig, max_predictions_for
from bertlab.data.maskers import num_to_predict
from bertlab.errors import InputError
from bertlab.inference import FillMaskResult, LayerGuess
from bertlab.storage.model_card import corpus_words
from bertlab.tokenizer import BertTokenizer

MASK = "[MASK]"

FILL_MASK_EXAMPLES: tuple[str, ...] = (
    "The capital of France is [MASK].",
    "The man went to the [MASK] to buy a gallon of milk.",
    "She poured a cup of [MASK] and sat down to read.",
    "The [MASK] barked at the mailman all morning.",
    "It was raining, so we took an [MASK] with us.",
    "I can't believe it is already [MASK]; the year went so fast.",
    "[MASK] is the largest planet in our solar system.",
    "The doctor told him to [MASK] more water and get some [MASK].",
)

# (label, sentence A, sentence B, is B really the next sentence?)
# Sentences about nothing in particular: following any sentence A with them, a model that reads B
# should say NotNext.
UNRELATED_SENTENCES = (
    "Volcanoes form where tectonic plates meet.",
    "The committee will vote on the budget on Tuesday.",
    "She tuned the old piano by ear.",
    "Copper conducts electricity well.",
)
NSP_EXAMPLES: tuple[tuple[str, str, str, bool], ...] = (
    ("IsNext: the store (paper's example)", "The man went to the store.", "He bought a gallon of milk.", True),
    ("NotNext: penguins (paper's example)", "The man went to the store.", "Penguins are flightless birds.", False),
    ("IsNext: the rain", "It started to rain heavily in the afternoon.", "We ran inside to stay dry.", True),
    ("NotNext: the rain", "It started to rain heavily in the afternoon.", "The recipe needs two cups of flour.", False),
    (
        "IsNext: the concert",
        "The concert was sold out weeks in advance.",
        "Fans waited outside hoping for spare tickets.",
        True,
    ),
    (
        "NotNext: the concert",
        "The concert was sold out weeks in advance.",
        "Mount Everest is the highest mountain on Earth.",
        False,
    ),
    (
        "IsNext: the exam",
        "She studied every night for the final exam.",
        "In the end she passed with the best grade in her class.",
        True,
    ),
    ("NotNext: the exam", "She studied every night for the final exam.", "The bridge was painted red in 1937.", False),
)

_WORD = re.compile(r"\[MASK\]|\w+(?:['’]\w+)*|[^\w\s]", re.UNICODE)


@dataclass(frozen=True)
class Word:
    """A word or punctuation mark of the text, with its character span."""

    index: int
    start: int
    end: int
    text: str

    @property
    def is_mask(self) -> bool:
        return self.text == MASK

    @property
    def is_punctuation(self) -> bool:
        return not any(ch.isalnum() for ch in self.text)


def split_words(text: str) -> list[Word]:
    """Words, punctuation marks and [MASK]s of `text`, in order, with character spans."""
    return [Word(i, m.start(), m.end(), m.group()) for i, m in enumerate(_WORD.finditer(text or ""))]


def maskable_words(text: str) -> list[Word]:
    """The words a user may click to mask: not punctuation, not already [MASK]."""
    return [w for w in split_words(text) if not w.is_mask and not w.is_punctuation]


def mask_words(
    text: str,
    indices: Sequence[int],
    tokenizer: BertTokenizer | None = None,
    whole_word: bool = True,
) -> str:
    """`text` with the words at `indices` (see `split_words`) replaced by [MASK].

    Args:
        whole_word: with a tokenizer, put one [MASK] per WordPiece of the word (whole-word
            masking, so 'playing' = 'play ##ing' becomes '[MASK] [MASK]'); otherwise one [MASK].

    Raises:
        InputError: an index that is not a word of the text.
    """
    words = split_words(text)
    chosen = sorted(set(indices))
    for i in chosen:
        if not 0 <= i < len(words):
            raise InputError(f"word {i} does not exist; the text has {len(words)} words")
    out, last = [], 0
    for i in chosen:
        w = words[i]
        n = len(tokenizer.tokenize(w.text)) if (tokenizer is not None and whole_word) else 1
        out.append(text[last : w.start])
        out.append(" ".join([MASK] * max(n, 1)))
        last = w.end
    out.append(text[last:])
    return "".join(out)


# --------------------------------------------------------------------------------------
# Notes about an input
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class InputNote:
    """Something a user should know about how the model read their text."""

    level: str  # "warning" or "info"
    message: str


def unknown_words(tokenizer: BertTokenizer, text: str, text_b: str | None = None) -> list[str]:
    """The pieces of the input that became [UNK] (characters or words the vocabulary lacks)."""
    e = tokenizer.encode(text, text_b, max_length=10**9)
    sources = (text, text_b or "")
    found = []
    for tok, (start, end), seq in zip(e.tokens, e.offsets, e.sequence_ids, strict=False):
        if tok == "[UNK]" and seq is not None:
            piece = sources[seq][start:end] or tok
            if piece not in found:
                found.append(piece)
    return found


def truncation_point(tokenizer: BertTokenizer, text: str, max_length: int, text_b: str | None = None) -> list[str]:
    """Where a too-long input is cut, one sentence per cut segment; [] when it fits.

    Example: ["the text is 700 tokens; the model reads 512, so 188 tokens after '…the end of
    the war' (character 2,310) were cut"].
    """
    full = tokenizer.encode(text, text_b, max_length=10**9)
    if len(full) <= max_length:
        return []
    kept = tokenizer.encode(text, text_b, max_length=max_length)
    out = []
    for seq, name, source in ((0, "sentence A" if text_b is not None else "the text", text), (1, "sentence B", text_b)):
        if source is None:
            continue
        n_full = sum(1 for s in full.sequence_ids if s == seq)
        kept_offsets = [o for o, s in zip(kept.offsets, kept.sequence_ids, strict=False) if s == seq]
        n_kept = len(kept_offsets)
        if n_kept == n_full:
            continue
        cut_at = kept_offsets[-1][1] if kept_offsets else 0
        start = max(0, cut_at - 40)
        tail = source[start:cut_at]
        if start > 0 and " " in tail:
            tail = tail[tail.index(" ") + 1 :]  # start at a whole word
        tail = tail.strip()
        out.append(
            f"{name} is {n_full} tokens and only the first {n_kept} fit (the model reads {max_length} tokens in all, "
            f"{tokenizer.cls_token} and {tokenizer.sep_token} included): "
            f"everything after '…{tail}' (character {cut_at:,}) was cut"
        )
    return out


def _shortened(word: str, limit: int = 30) -> str:
    return word if len(word) <= limit else f"{word[:limit]}… ({len(word):,} characters)"


def input_notes(
    tokenizer: BertTokenizer, max_length: int, text: str, text_b: str | None = None, pretrained: int = 0
) -> list[InputNote]:
    """Plain-language warnings about an input: truncation (and where), tokens at positions the model
    was never pretrained on (`pretrained`: its card's longest pretraining input, 0 = unknown; see
    bertlab.storage.model_card.pretrained_length) and [UNK] pieces (a long word shortened to its first characters)."""
    notes = [
        InputNote("warning", "Input too long: " + msg) for msg in truncation_point(tokenizer, text, max_length, text_b)
    ]
    if 0 < pretrained < max_length:
        read = len(tokenizer.encode(text, text_b, max_length=max_length))
        if read > pretrained:
            notes.append(
                InputNote(
                    "info",
                    f"The model reads {read} tokens here, but it was pretrained on inputs of at most {pretrained}: "
                    f"the last {read - pretrained} sit at positions whose embeddings it never trained, so what it "
                    "answers or attends to there is less reliable.",
                )
            )
    if unk := unknown_note(tokenizer, text, text_b):
        notes.append(unk)
    return notes


def unknown_note(
    tokenizer: BertTokenizer, text: str, text_b: str | None = None, then: str = "and cannot see what it was"
) -> InputNote | None:
    """A warning naming the pieces of the input the vocabulary lacks (read as [UNK]); None when none is.
    `then` says what follows from it where the input goes (a prediction, a pretraining example)."""
    unk = unknown_words(tokenizer, text, text_b)
    if not unk:
        return None
    shown = ", ".join(f"'{_shortened(u)}'" for u in unk[:8]) + (" …" if len(unk) > 8 else "")
    return InputNote(
        "warning", f"The vocabulary has no pieces for {shown}; the model reads each as [UNK] (unknown) {then}."
    )


def notes_of_two(a: Sequence[InputNote], b: Sequence[InputNote]) -> list[InputNote]:
    """Two models' notes on one input (Compare models): a note both have once, as it is; the rest
    named by model ("Model A: ...", "Model B: ..."), since each reads the text with its own
    vocabulary and length."""
    shared = [n for n in a if n in b]
    return (
        shared
        + [InputNote(n.level, f"Model A: {n.message}") for n in a if n not in shared]
        + [InputNote(n.level, f"Model B: {n.message}") for n in b if n not in shared]
    )


def independent_text(tokenizer: BertTokenizer, max_length: int, result: FillMaskResult) -> str:
    """The user's sentence with every [MASK] replaced by its own best answer, each chosen
    independently (compare `FillMaskResult.joint_text`, where later masks see earlier choices)."""
    enc = tokenizer.encode(result.text, max_length=max_length)
    return tokenizer.fill_text(
        result.text, enc, [m.position for m in result.masks], [m.candidates[0].token for m in result.masks]
    )


@dataclass(frozen=True)
class AnswerChange:
    """What switching heads off did to one candidate answer of a [MASK]."""

    word: str
    before: float  # probability with all heads (NaN: not among the candidates asked for)
    after: float  # probability with the heads off
    rank_before: int | None  # 1 = the top answer; None when not among the candidates
    rank_after: int | None

    def sentence(self, heads_off: int) -> str:
        """'**mat**: 34% (1st) with all heads → 12% (3rd) with 4 heads off' (markdown)."""

        def part(p: float, rank: int | None) -> str:
            return "not in the top answers" if rank is None else f"{p:.1%} (answer {rank})"

        return (
            f"**{self.word}**: {part(self.before, self.rank_before)} with all heads → "
            f"{part(self.after, self.rank_after)} with {heads_off} head{'' if heads_off == 1 else 's'} off"
        )


def answer_changes(rows: Sequence[dict], show: int = 8) -> list[AnswerChange]:
    """The answers worth showing from `AblationComparison.fill_rows` (word, 'all heads', 'heads
    off'): the top `show` with all heads, then any that rose into the top `show` with the heads
    off, each with its rank under both. Ordered by the probability with all heads."""

    def ranks(key: str) -> dict[str, int]:
        kept = sorted((r for r in rows if r[key] == r[key]), key=lambda r: -r[key])  # NaN != NaN: not ranked
        return {r["token"]: i + 1 for i, r in enumerate(kept)}

    before, after = ranks("all heads"), ranks("heads off")
    wanted = [w for w, k in before.items() if k <= show] + [
        w for w, k in after.items() if k <= show and before.get(w, show + 1) > show
    ]
    by_word = {r["token"]: r for r in rows}
    return [
        AnswerChange(w, by_word[w]["all heads"], by_word[w]["heads off"], before.get(w), after.get(w))
        for w in dict.fromkeys(wanted)
    ]


# --------------------------------------------------------------------------------------
# What a fill-mask answer can be trusted with
# --------------------------------------------------------------------------------------
# A fact a small model trained on old books rarely gets: (sentence, the right answer)
FACT_PROBE = ("The capital of France is [MASK].", "paris")


def _millions(n: float) -> str:
    return f"{n / 1e6:.1f}M" if n < 1e7 else f"{n / 1e6:.0f}M"


def model_limits(card: dict | None, num_parameters: int, fact_answers: Sequence[str]) -> str:
    """What the model was trained on and how often it is right, read from its card, and what it
    answers to `FACT_PROBE` (its top answers, `fact_answers`, best first), as markdown.

    The accuracies are the card's own: `metrics.mlm_acc` (held-out text of its pretraining corpus)
    and `unseen_english.overall.mlm_acc` (English outside that corpus); a card without them (a Hub
    model) leaves them out.
    """
    card = card or {}
    made = f"A {_millions(num_parameters)}-parameter model"
    tokens = card.get("total_tokens") or card.get("tokens")
    if isinstance(tokens, (int, float)) and tokens > 0:
        made += f" trained on {_millions(tokens)} tokens"
    if corpus := corpus_words(card):
        made += f" of {corpus}"
    parts = [made + "."]
    held = (card.get("metrics") or {}).get("mlm_acc")
    unseen = ((card.get("unseen_english") or {}).get("overall") or {}).get("mlm_acc")
    if isinstance(held, (int, float)):
        right = f"It guesses **{held:.1%}** of hidden words right on held-out text from its own corpus"
        if isinstance(unseen, (int, float)):
            right += f" and **{unseen:.1%}** on English it has not seen (web text, social media, news, reviews)"
        parts.append(right + ".")
    if fact_answers:
        sentence, truth = FACT_PROBE
        knows = fact_answers[0].lower() == truth
        parts.append(
            ("It knows some facts: " if knows else "It learned how sentences go more than facts about the world: ")
            + f"“{sentence}” → {', '.join(fact_answers)}."
        )
    return " ".join(parts)


def embedding_row_note(guess: LayerGuess, vocab_size: int) -> str:
    """Why the embeddings row (layer 0) of the layer-by-layer guesses at a [MASK] says nothing
    about the sentence, with this input's own numbers, as markdown.

    Before layer 1 the vector at the mask is LayerNorm([MASK]'s token embedding + its position and
    segment embeddings): it depends on where the mask stands, not on any word around it. The MLM
    head, which at other positions mostly reads the token back (at the embeddings 'france' answers
    'france'), has no word to read back at a [MASK]: its guess follows the position alone, the same
    list for every sentence with the mask there. Mid-sentence that list is nearly flat; first in a
    sentence it leans on the words that open sentences ('mr', 'the'), up to a quarter of the
    probability on one, so the note calls it flat only when its best is under ten times an even
    spread (a piece such as '##ise' shows joined to the word before the mask: 'is + ##ise').
    """
    if guess.layer != 0:
        raise InputError(f"the embeddings row is layer 0, got layer {guess.layer}")
    top = guess.candidates[0].score if guess.candidates else 0.0
    words = ", ".join(c.piece for c in guess.candidates[:4])
    even = 1 / vocab_size
    return (
        "**Not shown: the embeddings (before layer 1).** There the vector at the mask is only the `[MASK]` "
        "token's own embedding plus its position: no context yet. `[MASK]` stands for no word, so the head's "
        f"guess there can only follow where the mask stands{', and is nearly flat' if top < 10 * even else ''}: "
        f"its best, *{words}*, get at most {top:.1%} (a guess spread evenly over the {vocab_size:,} pieces "
        f"would give each {even:.2%}), and it is the same list for any sentence with the mask at this position."
    )


def chosen_count_text(num_tokens: int, num_chosen: int, config: DataConfig) -> str:
    """Why an example of `num_tokens` tokens ([CLS] and [SEP] included) has `num_chosen` chosen for
    the masked LM, as markdown: `masked_lm_prob` of the tokens, rounded, capped at
    `max_predictions_per_seq`, as Google's script counts (`bertlab.data.maskers.num_to_predict`).

    '15% of the 27 tokens ([CLS] and [SEP] count, as in Google's script) = 4.05, rounded to **4**
    (the cap is 10 per example: 15% of the 64-token maximum, rounded up)'
    """
    share, cap = config.masked_lm_prob, config.max_predictions_per_seq
    exact = num_tokens * share
    rounded = max(1, int(round(exact)))
    target = num_to_predict(num_tokens, config)
    if cap == max_predictions_for(config.max_seq_length, share):
        why_cap = f"{share:.0%} of the {config.max_seq_length}-token maximum, rounded up"
    else:
        why_cap = "max_predictions_per_seq"
    text = f"{share:.0%} of the {num_tokens} tokens ([CLS] and [SEP] count, as in Google's script) = {exact:.2f}"
    if rounded > cap:
        text += f", rounded to {rounded}, capped at **{cap}** per example ({why_cap})"
    else:
        text += f", rounded to **{rounded}** (the cap is {cap} per example: {why_cap})"
    if num_chosen < target:
        text += (
            f"; whole-word masking chose {num_chosen} of these {target}: a word's pieces are chosen together, "
            f"and a word that would take the count past {target} is skipped"
            if config.whole_word_mask
            else f"; only {num_chosen} of these {target} could be chosen"
        )
    return text
