"""Explanations of pretraining instances, for the app and for curious users: what each position of an
instance is (its segment, whether it was masked and how, what the model must predict), made from a
text typed in (`explain_text`) or from any instance (`explain_instance`).

Imports bertlab.data.pretraining_data (the instances it explains), its maskers and the tokenizer.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from bertlab.data.corpus import Document, split_sentences
from bertlab.data.data_config import DataConfig
from bertlab.data.maskers import (
    KIND_NAMES,
    make_masker,
)
from bertlab.data.objectives import get_objective
from bertlab.data.pretraining_data import Instance, apply_mask, instances_by_document, running_text
from bertlab.errors import InputError
from bertlab.tokenizer import BertTokenizer


# --------------------------------------------------------------------------------------
# Explanations (for the app and for curious users)
# --------------------------------------------------------------------------------------
@dataclass
class ExplainedInstance:
    """A human-readable view of one instance.

    Attributes:
        tokens: the input after masking. original_tokens: before masking.
        kinds: per position, "" (not chosen) / "mask" / "random" / "keep".
        a_end: index of the first [SEP] (A is tokens[1:a_end]).
        is_next: True for IsNext (sentence order: in order). reason: why, in plain words.
    """

    tokens: list[str]
    original_tokens: list[str]
    kinds: list[str]
    segment_ids: list[int]
    a_end: int
    is_next: bool
    doc_a: int
    doc_b: int
    reason: str
    num_chosen: int = 0


def explain_instance(
    inst: Instance, tokenizer: BertTokenizer, doc_names: Sequence[str] | None = None, objective: str = "mlm_nsp"
) -> ExplainedInstance:
    tokens = tokenizer.convert_ids_to_tokens(inst.input_ids)
    original = list(tokens)
    kinds = [""] * len(tokens)
    for p, lab, k in zip(inst.masked_positions, inst.masked_labels, inst.mask_kinds, strict=True):
        original[p] = tokenizer.id_to_token.get(lab, "[UNK]")
        kinds[p] = KIND_NAMES[k]

    def name(d: int) -> str:
        return doc_names[d] if doc_names and d < len(doc_names) else f"document {d}"

    spec = get_objective(objective)
    if spec.full_sentences:
        across = (
            ""
            if inst.doc_b == inst.doc_a
            else f" and on into {name(inst.doc_b)} ({tokenizer.sep_token} marks where a document ends)"
        )
        reason = f"RoBERTa's FULL-SENTENCES, no next-sentence task: whole sentences from {name(inst.doc_a)}{across}."
    elif spec.pair_head == "sop":
        reason = (
            f"Swapped: A and B are consecutive in {name(inst.doc_a)}, and the coin flip (50%) swapped them: B comes before A."
            if inst.is_swapped
            else f"In order: B is the text that really follows A in {name(inst.doc_a)} (the coin flip, 50%, kept the order)."
        )
    elif spec.paired and not spec.nsp:
        reason = (
            "No next-sentence task: A and B are packed as for MLM + NSP ([CLS] A [SEP] B [SEP], segments A "
            f"and B), and B is always the text that really follows A in {name(inst.doc_a)}; only the loss differs."
        )
    elif not spec.nsp:
        reason = "No next-sentence task: the input is one stretch of contiguous text from " + name(inst.doc_a) + "."
    elif inst.is_random_next:
        reason = (
            f"NotNext: the coin flip (50%) chose a random B, so B was taken from {name(inst.doc_b)}, "
            f"not from {name(inst.doc_a)} where A comes from; the sentences that really followed A were put back for later instances."
        )
    else:
        reason = f"IsNext: B is the text that really follows A in {name(inst.doc_a)}."
    return ExplainedInstance(
        tokens=tokens,
        original_tokens=original,
        kinds=kinds,
        segment_ids=inst.segment_ids if spec.paired else [0] * len(tokens),
        a_end=inst.a_len + 1,
        is_next=not (inst.is_random_next or inst.is_swapped),
        doc_a=inst.doc_a,
        doc_b=inst.doc_b,
        reason=reason,
        num_chosen=len(inst.masked_positions),
    )


OTHER_DOCUMENTS = [
    "The river rises in the hills to the north. It flows south through farmland and two small towns. "
    "In spring the water is high and fast. Fishermen come from far away to catch trout.",
    "The recipe needs flour, butter and sugar. Mix them slowly in a large bowl. "
    "Bake the dough for twenty minutes. Let the cake cool before you cut it.",
    "The match began at noon under a grey sky. The home team scored early in the first half. "
    "The visitors equalised just before the break. Nobody scored again, and the game ended in a draw.",
]


_ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")


def _user_document_name(i: int) -> str:
    return f"your {_ORDINALS[i]} document" if i < len(_ORDINALS) else f"your document {i + 1}"


def text_to_documents(text: str) -> list[Document]:
    """User text -> documents: blank lines separate documents; sentences are split for the user."""
    docs = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        sents = split_sentences(block)
        if sents:
            docs.append(sents)
    return docs


def explain_text(
    text: str, tokenizer: BertTokenizer, config: DataConfig | None = None, seed: int = 0
) -> list[ExplainedInstance]:
    """Take `text` through the pretraining pipeline and explain every instance made from it.

    Blank lines separate documents. NotNext B segments come from the user's other documents; only
    when they typed one document are a few built-in texts added as partners, so a single paragraph
    still gets NotNext examples. Documents are named "your first document", "the built-in text
    '...'" (never "document B", which reads as segment B).
    """
    config = config or DataConfig()
    docs = text_to_documents(text)
    if not docs:
        raise InputError("the text is empty; type a few sentences (blank lines separate documents)")
    names_all = [_user_document_name(i) for i in range(len(docs))] + [
        f'the built-in text "{t[:30]}..."' for t in OTHER_DOCUMENTS
    ]
    token_docs, names = [], []
    n_user = 0
    for i, d in enumerate(docs + [split_sentences(t) for t in OTHER_DOCUMENTS]):
        sents = [ids for ids in tokenizer.tokenize_batch(running_text(d)) if ids]
        if sents:
            token_docs.append(sents)
            names.append(names_all[i])
            n_user += i < len(docs)
    if n_user == 0:
        raise InputError("the text has no tokens the model knows")
    if n_user >= 2:  # the user's own documents are the partners: no built-in text in their examples
        token_docs, names = token_docs[:n_user], names[:n_user]
    rng = random.Random(seed)
    masker = make_masker(tokenizer, config)
    out = []
    for made in instances_by_document(token_docs, n_user, config, tokenizer, rng):
        for inst in made:
            if masker is not None:
                apply_mask(inst, masker, rng)
            out.append(explain_instance(inst, tokenizer, names, config.objective))
    return out
