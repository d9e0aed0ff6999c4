"""The pretraining objectives: one frozen `Objective` per objective, registered in `OBJECTIVES`.

An objective says how its instances are made (segment pairs or contiguous text; how B is chosen:
a random other document half the time, A and B swapped half the time, or always A's continuation),
which positions are predicted (a masker, by name in bertlab.data.maskers.MASKERS, or every
position's next token), what the model needs (the sentence-pair head, the attention direction),
whether a training step has static shapes, and what the model card says.
bertlab.data.pretraining_data, pretrain_config, pretrain and model_card read these fields instead of
testing the objective's name, so a new objective (span masking, sentence order, ...) is one new
`Objective` here plus its masker (`maskers.register_masker`) and, if its loss is new, one function
in bertlab.losses (the torch side, which this spec names by `loss`).

Data only: imports bertlab.errors; no torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from bertlab.errors import InputError


@dataclass(frozen=True)
class Objective:
    """What one pretraining objective makes, trains and is called."""

    name: str  # the `data.objective` value, e.g. "mlm_nsp"
    paired: bool  # inputs are [CLS] A [SEP] B [SEP] with segments A/B; else [CLS] text [SEP]
    nsp: bool  # next sentence prediction: B is a random document half the time, the NSP head and loss
    masker: str | None  # which masker chooses the predicted positions (bertlab.data.maskers.MASKERS); None: none
    next_token_labels: bool  # the label at position t is the token at t+1 (a left-to-right LM)
    attention_direction: str  # BertConfig.attention_direction: "bidirectional" | "left_to_right"
    description: str  # the model card's sentence
    short: str  # the model card's "Pretraining tasks" entry
    loss: str  # its loss in bertlab.losses.LOSSES (torch-side), which runs the model's heads
    # the one family it trains, which in turn trains with no other objective (ELECTRA's generator and
    # discriminator pair); None: any family with the heads it needs
    model_type: str | None = None
    # RoBERTa's FULL-SENTENCES: one stretch of whole sentences read across the corpus, documents
    # joined by an extra separator (pretraining_data.create_full_sentence_instances); else instances
    # come from one document each (`paired` says how)
    full_sentences: bool = False
    # how a pair's B is chosen (SEGMENT_B): "random_document" half the time (NSP; with nsp=True), A's
    # "continuation" always (No NSP), or A's continuation with A and B "swap"ped half the time (ALBERT's
    # sentence order: the SOP head and loss, label 1 = swapped)
    segment_b: str = "continuation"
    # SpanBERT's span-boundary objective: each masked token is also predicted from its span's two
    # boundary tokens (the model's SBO head, BertConfig.span_boundary_head); its masker must keep spans
    # apart, so that the loss can read them back from the labels (maskers.SpanBoundaryMasker)
    span_boundary: bool = False

    def __post_init__(self) -> None:
        if self.segment_b not in SEGMENT_B:
            raise ValueError(f"{self.name}: segment_b must be one of {SEGMENT_B}, not {self.segment_b!r}")
        if self.nsp != (self.segment_b == "random_document"):
            raise ValueError(f"{self.name}: NSP (nsp=True) and segment_b='random_document' go together")

    @property
    def pair_head(self) -> str | None:
        """The sentence-pair head it trains ("nsp", "sop": bertlab.models.registry's head names), or None."""
        return {"random_document": "nsp", "swap": "sop"}.get(self.segment_b) if self.paired else None

    @property
    def heads(self) -> tuple[str, ...]:
        """The heads beyond the masked LM it trains (bertlab.models.registry's head names): its
        sentence-pair head and the span-boundary head, where it has them."""
        return tuple(h for h in (self.pair_head, "sbo" if self.span_boundary else None) if h is not None)

    @property
    def static_shapes(self) -> bool:
        """Masked positions are capped (max_predictions_per_seq), so a compiled step traces once;
        a next-token LM scores every position and its shapes follow the data."""
        return self.masker is not None and not self.next_token_labels


SEGMENT_B = ("random_document", "continuation", "swap")
OBJECTIVES: dict[str, Objective] = {}


def register_objective(objective: Objective) -> Objective:
    """Add an objective (its masker, if new, goes to `maskers.register_masker`)."""
    OBJECTIVES[objective.name] = objective
    return objective


def get_objective(name: str) -> Objective:
    """The registered objective called `name`.

    Raises:
        InputError: no objective has that name.
    """
    try:
        return OBJECTIVES[name]
    except KeyError:
        raise InputError(f"objective must be one of {tuple(OBJECTIVES)}, not {name!r}") from None


register_objective(
    Objective(
        "mlm_nsp",
        paired=True,
        nsp=True,
        masker="bert",
        next_token_labels=False,
        attention_direction="bidirectional",
        description="masked LM + next sentence prediction, as in Devlin et al. 2018",
        short="masked LM + next sentence prediction",
        loss="masked_lm_nsp",
        segment_b="random_document",
    )
)
# No NSP keeps MLM + NSP's packing and segment embeddings (B is then always the real continuation),
# so the ablation changes the loss only.
register_objective(
    Objective(
        "mlm",
        paired=True,
        nsp=False,
        masker="bert",
        next_token_labels=False,
        attention_direction="bidirectional",
        description="masked LM only: the paper's No NSP ablation (same input packing, no NSP loss or head)",
        short="masked LM only (no next sentence prediction)",
        loss="masked_lm",
    )
)
register_objective(
    Objective(
        "ltr",
        paired=False,
        nsp=False,
        masker=None,
        next_token_labels=True,
        attention_direction="left_to_right",
        description="left-to-right LM without NSP: the paper's LTR & No NSP ablation (causal attention, "
        "next-token loss)",
        short="left-to-right LM (no next sentence prediction)",
        loss="masked_lm",
    )
)
# SpanBERT (Joshi et al. 2019): single segments and no NSP, as in the paper; spans of whole words
# masked (bertlab.data.maskers.SpanMasker). `span_sbo` below adds the span-boundary objective.
register_objective(
    Objective(
        "span",
        paired=False,
        nsp=False,
        masker="span",
        next_token_labels=False,
        attention_direction="bidirectional",
        description="SpanBERT's span masking (Joshi et al. 2019): spans of whole words, lengths from "
        "Geometric(0.2) clipped at 10, single segments, no NSP",
        short="masked LM over word spans (SpanBERT)",
        loss="masked_lm",
    )
)
# SpanBERT's whole objective (Joshi et al. 2019, §3.2): span masking as `span` (with a gap between any
# two spans: bertlab.data.maskers.SpanBoundaryMasker) plus the span-boundary objective, each masked token
# predicted again from the encoder's outputs at its span's two boundary tokens and its place in the span
# (the SBO head, BERT's only); loss = masked LM mean + SBO mean (bertlab.losses.masked_lm_sbo).
register_objective(
    Objective(
        "span_sbo",
        paired=False,
        nsp=False,
        masker="span_sbo",
        next_token_labels=False,
        attention_direction="bidirectional",
        description="SpanBERT's span masking + span-boundary objective (Joshi et al. 2019): spans of whole "
        "words as in span, each masked token also predicted from the two tokens just outside its span and "
        "its place in the span (loss: masked LM + SBO), single segments, no NSP",
        short="masked LM over word spans + span-boundary objective (SpanBERT)",
        loss="masked_lm_sbo",
        span_boundary=True,
    )
)
# ELECTRA (Clark et al. 2020): BERT's masker picks 15% of the tokens, a small generator fills them
# with samples and the discriminator says for every token whether it was replaced. Pairs without NSP
# (No NSP's packing: ELECTRA's own data keeps two segments), so that it differs from No NSP only in
# what is learned. ELECTRA's code masks 85% [MASK] / 15% kept where BERT's masker does 80/10/10.
register_objective(
    Objective(
        "electra",
        paired=True,
        nsp=False,
        masker="bert",
        next_token_labels=False,
        attention_direction="bidirectional",
        description="ELECTRA's replaced-token detection (Clark et al. 2020): a small generator fills 15% "
        "of the tokens with its samples, the discriminator says for every token whether it was replaced "
        "(loss: generator masked LM + 50 x discriminator)",
        short="replaced-token detection (ELECTRA), with a masked-LM generator",
        loss="replaced_token_detection",
        model_type="electra",
    )
)
# RoBERTa's recipe (Liu et al. 2019, §4.2 and Table 2): masked LM only, on FULL-SENTENCES inputs in one
# segment. The recipe's dynamic masking is data.masking=dynamic and its byte-level BPE tokenizer=bpe;
# each stays a setting of its own, so that each can be compared on its own.
register_objective(
    Objective(
        "roberta",
        paired=False,
        nsp=False,
        masker="bert",
        next_token_labels=False,
        attention_direction="bidirectional",
        description="RoBERTa's recipe (Liu et al. 2019): masked LM only on FULL-SENTENCES inputs (whole sentences "
        "packed up to the length, across document boundaries with an extra separator), no NSP",
        short="masked LM only on FULL-SENTENCES (RoBERTa)",
        loss="masked_lm",
        full_sentences=True,
    )
)
# ALBERT's sentence-order prediction (Lan et al. 2019, §3.2): A and B are two consecutive stretches
# of one document, swapped half the time; the model says whether they are in order. Any family with
# an SOP head trains it (ALBERT's model_type=albert).
register_objective(
    Objective(
        "mlm_sop",
        paired=True,
        nsp=False,
        masker="bert",
        next_token_labels=False,
        attention_direction="bidirectional",
        description="masked LM + sentence-order prediction, as in ALBERT (Lan et al. 2019): A and B are "
        "consecutive segments of one document, swapped half the time",
        short="masked LM + sentence-order prediction (ALBERT)",
        loss="masked_lm_sop",
        segment_b="swap",
    )
)
