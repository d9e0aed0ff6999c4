"""bertlab.inference: fill-mask (independent and joint), whole-word merging, batching, input
errors and truncation, next-sentence prediction, inspection with head masks, and layer-by-layer
predictions, all on a tiny random model."""

import numpy as np
import pytest
import torch
from conftest import tiny_config
from torch.testing import assert_close

from bertlab.errors import InputError
from bertlab.hardware import pick_device
from bertlab.inference import LoadedModel, load_model
from bertlab.model import BertForPreTraining
from bertlab.storage.checkpoint import save_checkpoint
from bertlab.tokenizer import fill_text, whole_word

TEXTS = [
    "the cat sat on the [MASK].",
    "Paris is the [MASK] of France.",
    "the [MASK] ran to the [MASK] and [MASK].",
    "a big [MASK] dog",
]


@pytest.fixture(scope="module")
def lm(tmp_path_factory, tokenizer) -> LoadedModel:
    """A tiny random model with a wide init, so predictions are peaked rather than near-uniform
    and top-k orders are not decided by rounding noise."""
    torch.manual_seed(11)
    model = BertForPreTraining(tiny_config(len(tokenizer), initializer_range=0.3))
    d = save_checkpoint(tmp_path_factory.mktemp("inference") / "model", model, tokenizer)
    return load_model(d, device="cpu")


def _reference_probs(lm: LoadedModel, ids: list[int]) -> torch.Tensor:
    """(T, V) MLM probabilities straight from the model, no inference code involved."""
    with torch.no_grad():
        return lm.model(torch.tensor([ids])).mlm_logits[0].softmax(-1)


# --- fill-mask ---------------------------------------------------------------------------------
def test_fill_mask_shapes_and_probabilities(lm):
    res = lm.fill_mask(TEXTS[0], top_k=4)
    assert res.tokens[0] == "[CLS]" and res.tokens[-1] == "[SEP]"
    assert len(res.masks) == 1
    mask = res.masks[0]
    assert res.tokens[mask.position] == "[MASK]"
    scores = [c.score for c in mask.candidates]
    assert len(scores) == 4
    assert all(0 <= s <= 1 for s in scores) and sum(scores) <= 1 + 1e-6
    assert scores == sorted(scores, reverse=True)
    ref = _reference_probs(lm, lm.tokenizer.encode(TEXTS[0]).ids)[mask.position]
    top = ref.topk(4)
    assert [c.token_id for c in mask.candidates] == top.indices.tolist()
    assert_close(torch.tensor(scores), top.values, atol=1e-6, rtol=1e-5)
    assert [c.token for c in mask.candidates] == lm.tokenizer.convert_ids_to_tokens(top.indices.tolist())
    assert not res.truncated and res.num_dropped == 0
    assert len(lm.fill_mask(TEXTS[0], top_k=100_000).masks[0].candidates) == len(lm.tokenizer)


def test_single_mask_joint_is_top_answer(lm):
    res = lm.fill_mask(TEXTS[1], top_k=3)
    assert res.joint == [res.masks[0].candidates[0]] and res.joint_order == [0]
    # the user's own text, casing kept, with the answer in place of [MASK]
    assert res.joint_text == TEXTS[1].replace("[MASK]", res.masks[0].candidates[0].token)


def test_several_masks_independent_and_joint(lm):
    text = TEXTS[2]
    res = lm.fill_mask(text, top_k=3)
    enc = lm.tokenizer.encode(text)
    positions = [i for i, t in enumerate(enc.ids) if t == lm.tokenizer.mask_id]
    assert [m.position for m in res.masks] == positions
    # independent: each mask scored with all the others still masked, in one pass
    ref = _reference_probs(lm, enc.ids)
    for m in res.masks:
        assert [c.token_id for c in m.candidates] == ref[m.position].topk(3).indices.tolist()
    # joint: most-confident-first, re-reading the sentence after each choice
    assert sorted(res.joint_order) == list(range(len(positions)))
    assert len(res.joint) == len(positions)
    assert "[MASK]" not in res.joint_text
    ids = list(enc.ids)
    remaining = list(range(len(positions)))
    for step in range(len(positions)):
        probs = _reference_probs(lm, ids)
        best = max(remaining, key=lambda n: probs[positions[n]].max().item())
        assert res.joint_order[step] == best
        assert res.joint[best].token_id == int(probs[positions[best]].argmax())
        ids[positions[best]] = res.joint[best].token_id
        remaining.remove(best)
    first = res.joint_order[0]
    assert res.joint[first].token_id == res.masks[first].candidates[0].token_id
    words = res.joint_text.rstrip(".").replace(" and", "").split()
    assert [words[1], words[5]] == [res.joint[0].token, res.joint[1].token]


def test_joint_false_takes_each_top_answer(lm):
    res = lm.fill_mask(TEXTS[2], joint=False)
    assert [c.token_id for c in res.joint] == [m.candidates[0].token_id for m in res.masks]
    assert res.joint_order == [0, 1, 2]
    assert "[MASK]" not in res.joint_text


def test_batch_equals_one_by_one(lm):
    batch = lm.fill_mask(TEXTS, top_k=3)
    assert isinstance(batch, list) and len(batch) == len(TEXTS)
    assert isinstance(lm.fill_mask(TEXTS[:1]), list)
    for text, b in zip(TEXTS, batch, strict=True):
        one = lm.fill_mask(text, top_k=3)
        assert b.text == text and b.tokens == one.tokens
        assert b.joint_text == one.joint_text and b.joint_order == one.joint_order
        for mb, mo in zip(b.masks, one.masks, strict=True):
            assert [c.token for c in mb.candidates] == [c.token for c in mo.candidates]
            assert_close(
                torch.tensor([c.score for c in mb.candidates]),
                torch.tensor([c.score for c in mo.candidates]),
                atol=1e-5,
                rtol=1e-4,
            )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("   \n", "empty"),
        ("the cat sat on the mat.", r"no \[MASK\]"),
    ],
)
def test_bad_inputs_raise(lm, text, message):
    with pytest.raises(InputError, match=message):
        lm.fill_mask(text)
    with pytest.raises(InputError, match=message):
        lm.fill_mask(["the [MASK] sat.", text])


def test_other_argument_errors(lm):
    with pytest.raises(InputError, match="top_k"):
        lm.fill_mask(TEXTS[0], top_k=0)
    with pytest.raises(InputError, match="no texts"):
        lm.fill_mask([])
    with pytest.raises(InputError, match="string"):
        lm.fill_mask([None])  # type: ignore[list-item]
    with pytest.raises(InputError, match="head_mask has shape"):
        lm.fill_mask(TEXTS[0], head_mask=torch.ones(3, 3))
    with pytest.raises(InputError, match="unknown device"):
        pick_device("gpu")
    assert pick_device("cpu") == torch.device("cpu")


def test_all_masks_truncated_away(lm):
    text = "the cat sat on the mat . " * 20 + "the [MASK] ran."  # ~150 tokens, model reads 64
    with pytest.raises(InputError, match="cut off"):
        lm.fill_mask(text)
    with pytest.raises(InputError, match="cut off"):
        lm.layer_predictions(text)


def test_long_text_with_mask_kept_is_truncated(lm):
    text = "the [MASK] sat on the mat. " + "the dog ran to the park. " * 20
    res = lm.fill_mask(text)
    assert res.truncated and res.num_dropped > 0
    assert len(res.tokens) == lm.max_length
    assert len(res.tokens) + res.num_dropped == len(lm.tokenizer.encode(text, max_length=10_000))
    # the joint text covers what the model read, not the cut-off tail
    assert res.joint_text.startswith("the ") and "[MASK]" not in res.joint_text
    assert len(res.joint_text) < len(text) - 40


# --- helpers -------------------------------------------------------------------------------------
def test_whole_word_merges_pieces():
    tokens = ["[CLS]", "the", "play", "##ing", "[MASK]", "##s", "cat", "##s", "[SEP]"]
    assert whole_word(tokens, 4, "dog") == "dogs"  # right-hand ## pieces join
    assert whole_word(tokens, 3, "##ed") == "played"  # a ## answer joins the word before
    assert whole_word(tokens, 6, "rat") == "rats"
    assert whole_word(tokens, 7, "##z") == "catz"
    assert whole_word(tokens, 1, "a") == "a"
    assert whole_word(["[CLS]", "[MASK]", "[SEP]"], 1, "##s") == "s"  # nothing to join
    assert whole_word(["[CLS]", "[MASK]", "[MASK]", "[SEP]"], 2, "##s") == "s"  # not onto a mask
    # a [MASK] typed inside a word ("unbeliev[MASK]") continues it; one standing alone does not
    assert whole_word(["[CLS]", "un", "##believ", "[MASK]", "[SEP]"], 3, "##able", attached=True) == "unbelievable"
    assert whole_word(["[CLS]", "un", "##believ", "[MASK]", "[SEP]"], 3, "##able") == "unbeliev + ##able"


def test_predicted_piece_after_a_typed_word_is_shown_as_a_piece():
    """Issue 12: 'is' + a predicted '##s' is shown as 'is + ##s', never glued into 'iss'."""
    tokens = ["[CLS]", "the", "cat", "is", "[MASK]", ".", "[SEP]"]
    assert whole_word(tokens, 4, "##s") == "is + ##s"
    assert whole_word(tokens, 4, "##s", attached=False) == "is + ##s"
    assert whole_word(tokens, 4, "here") == "here"  # whole-word answers are unchanged
    assert whole_word(tokens, 4, "##s", attached=True) == "iss"  # only where the user typed "is[MASK]"


@pytest.fixture(scope="module")
def lm_s(tmp_path_factory, tokenizer) -> LoadedModel:
    """A tiny model whose MLM head always answers '##s' first (a large output bias)."""
    torch.manual_seed(3)
    model = BertForPreTraining(tiny_config(len(tokenizer)))
    with torch.no_grad():
        model.cls.predictions.bias[tokenizer.vocab["##s"]] = 100.0
    d = save_checkpoint(tmp_path_factory.mktemp("inference_s") / "model", model, tokenizer)
    return load_model(d, device="cpu")


def test_fill_mask_shows_predicted_pieces_as_pieces(lm_s):
    res = lm_s.fill_mask("the cat is [MASK].", top_k=3)
    top = res.masks[0].candidates[0]
    assert top.token == "##s" and top.word == "is + ##s"
    assert res.joint_text == "the cat is + ##s."
    # a [MASK] typed against the word is inside it: the piece completes the word
    res = lm_s.fill_mask("the cat[MASK] ran.", top_k=1)
    assert res.masks[0].candidates[0].word == "cats" and res.joint_text == "the cats ran."
    # the layer read-out and the every-position inspection display the same way
    assert lm_s.layer_predictions("the cat is [MASK].", top_k=1)[-1].candidates[0].word == "is + ##s"
    ins = lm_s.inspect("the cats ran", top_k=1)
    at = {t: c[0].word for t, c in zip(ins.tokens, ins.mlm_top, strict=True)}
    assert at["##s"] == "cats"  # a piece of a typed word: replaced inside the word
    assert at["ran"] == "cats + ##s"  # a typed word start: shown as a piece after "cats"


def test_joint_fill_glues_pieces_of_one_masked_word(lm_s, tokenizer):
    """Two masks standing for one word (whole-word masking writes '[MASK] [MASK]'): the second
    mask's piece joins the first mask's answer, because both pieces are the model's."""
    text = "the [MASK] [MASK] ran."
    enc = tokenizer.encode(text)
    pos = [i for i, t in enumerate(enc.tokens) if t == "[MASK]"]
    assert fill_text(text, enc, pos, ["play", "##ing"]) == "the playing ran."
    assert fill_text(text, enc, pos, ["##s", "##s"]) == "the + ##ss ran."


def test_candidate_word_uses_neighbouring_pieces(lm):
    ins = lm.inspect("the cats played", top_k=2)
    cat = ins.tokens.index("cat")
    assert ins.tokens[cat + 1] == "##s"
    for c in ins.mlm_top[cat]:
        # "cat" starts a typed word: a ## answer there is shown as a piece after "the", not glued to it
        expected = "the + " + c.token + "s" if c.token.startswith("##") else c.token + "s"
        assert c.word == expected


def test_fill_text_from_offsets(tokenizer):
    text = "He play [MASK] in the [MASK]."
    enc = tokenizer.encode(text)
    pos = [i for i, t in enumerate(enc.tokens) if t == "[MASK]"]
    # "play [MASK]": the mask stands as its own word, so a ## answer is a piece, not "played"
    assert fill_text(text, enc, pos, ["##ed", "park"]) == "He play + ##ed in the park."
    enc = tokenizer.encode("He play[MASK] in the park.")
    assert (
        fill_text("He play[MASK] in the park.", enc, [enc.tokens.index("[MASK]")], ["##ed"]) == "He played in the park."
    )
    enc = tokenizer.encode("the cat[MASK].")
    pos = [enc.tokens.index("[MASK]")]
    assert fill_text("the cat[MASK].", enc, pos, ["##s"]) == "the cats."
    assert fill_text("the cat[MASK].", enc, pos, ["ran"]) == "the cat ran."


# --- next sentence ---------------------------------------------------------------------------------
def test_next_sentence_single_and_batch(lm):
    a = ["the cat sat on the mat.", "Paris is the capital of France.", "the dog ran"]
    b = ["it was a big cat.", "the bird sang in the tree.", "to the park and played in the park all day long"]
    batch = lm.next_sentence(a, b)
    assert len(batch) == 3
    for x, y, r in zip(a, b, batch, strict=True):
        one = lm.next_sentence(x, y)
        assert 0.0 <= r.is_next_prob <= 1.0
        assert r.is_next == (r.is_next_prob >= 0.5)
        assert abs(one.is_next_prob - r.is_next_prob) < 1e-5
        assert r.tokens.count("[SEP]") == 2 and set(r.segment_ids) == {0, 1}
    with pytest.raises(InputError, match="sentences B"):
        lm.next_sentence(a, b[:2])
    with pytest.raises(InputError, match="sentence B is empty"):
        lm.next_sentence("the cat", " ")
    with pytest.raises(InputError, match="sentence A is empty"):
        lm.next_sentence("", "the cat")


def test_next_sentence_matches_model(lm):
    enc = lm.tokenizer.encode("the cat sat.", "it ran.")
    with torch.no_grad():
        out = lm.model(torch.tensor([enc.ids]), torch.tensor([enc.type_ids]))
    expected = out.nsp_logits.softmax(-1)[0, 0].item()
    assert abs(lm.next_sentence("the cat sat.", "it ran.").is_next_prob - expected) < 1e-6


# --- inspect and head masks ---------------------------------------------------------------------
def test_inspect_shapes(lm):
    cfg = lm.config
    ins = lm.inspect("the cat sat on the mat.", "it was big.", top_k=3)
    T = len(ins.tokens)
    assert ins.attentions.shape == (cfg.num_layers, cfg.num_heads, T, T)
    assert ins.hidden_states.shape == (cfg.num_layers + 1, T, cfg.hidden_size)
    assert ins.attentions.dtype == np.float32 and ins.hidden_states.dtype == np.float32
    np.testing.assert_allclose(ins.attentions.sum(-1), 1.0, atol=1e-5)
    assert ins.segment_ids == lm.tokenizer.encode("the cat sat on the mat.", "it was big.").type_ids
    assert ins.position_ids == list(range(T)) and len(ins.word_ids) == T
    assert len(ins.mlm_top) == T and all(len(c) == 3 for c in ins.mlm_top)
    assert ins.nsp_is_next_prob is not None and 0 <= ins.nsp_is_next_prob <= 1
    with torch.no_grad():
        enc = lm.model.bert(torch.tensor([ins.token_ids]), torch.tensor([ins.segment_ids]))
    np.testing.assert_allclose(ins.hidden_states[-1], enc.last_hidden_state[0].numpy(), atol=1e-5)


def test_head_mask_switches_heads_off(lm):
    text = TEXTS[2]
    L, A = lm.config.num_layers, lm.config.num_heads
    off = torch.ones(L, A)
    off[0, 1] = 0
    off[1, 2] = 0
    base = lm.inspect(text)
    masked = lm.inspect(text, head_mask=off)
    assert np.abs(masked.attentions[0, 1]).max() == 0 and np.abs(masked.attentions[1, 2]).max() == 0
    np.testing.assert_allclose(masked.attentions[0, 0], base.attentions[0, 0], atol=1e-6)  # layer 0 input unchanged
    np.testing.assert_allclose(masked.attentions[1, 0].sum(-1), 1.0, atol=1e-5)
    before = lm.fill_mask(text, top_k=3)
    after = lm.fill_mask(text, top_k=3, head_mask=off)
    diff = max(
        abs(a.score - b.score)
        for ma, mb in zip(before.masks, after.masks, strict=True)
        for a, b in zip(ma.candidates, mb.candidates, strict=True)
    )
    assert diff > 1e-4
    assert lm.fill_mask(text, top_k=3, head_mask=torch.ones(L, A)).masks == before.masks
    nsp_before = lm.next_sentence("the cat", "the dog").is_next_prob
    assert lm.next_sentence("the cat", "the dog", head_mask=off).is_next_prob != pytest.approx(nsp_before, abs=1e-7)


# --- layer predictions ---------------------------------------------------------------------------
def test_layer_predictions(lm):
    text = TEXTS[2]
    guesses = lm.layer_predictions(text, top_k=3)
    assert [g.layer for g in guesses] == list(range(lm.config.num_layers + 1))
    assert all(len(g.candidates) == 3 for g in guesses)
    fill = lm.fill_mask(text, top_k=3, joint=False).masks[0]
    assert [c.token_id for c in guesses[-1].candidates] == [c.token_id for c in fill.candidates]
    assert_close(
        torch.tensor([c.score for c in guesses[-1].candidates]),
        torch.tensor([c.score for c in fill.candidates]),
        atol=1e-5,
        rtol=1e-4,
    )
    second = lm.fill_mask(text, top_k=3).masks[1]
    at_second = lm.layer_predictions(text, position=second.position, top_k=3)[-1]
    assert [c.token_id for c in at_second.candidates] == [c.token_id for c in second.candidates]
    with pytest.raises(InputError, match=r"no \[MASK\]"):
        lm.layer_predictions("the cat sat")
    with pytest.raises(InputError, match="outside"):
        lm.layer_predictions(text, position=99)
    off = torch.ones(lm.config.num_layers, lm.config.num_heads)
    off[:, 0] = 0
    masked = lm.layer_predictions(text, top_k=3, head_mask=off)
    assert masked[0].candidates == guesses[0].candidates  # embeddings see no attention
    assert masked[-1].candidates != guesses[-1].candidates


def test_lowercase_mask_is_read_as_mask_and_masks_are_capped(lm):
    from bertlab.inference import MAX_MASKS

    upper = lm.fill_mask("the cat [MASK] on the mat.")
    lower = lm.fill_mask("the cat [mask] on the mat.")
    assert [c.token for c in lower.masks[0].candidates] == [c.token for c in upper.masks[0].candidates]
    with pytest.raises(InputError, match=f"at most {MAX_MASKS}"):
        lm.fill_mask(" ".join(["[MASK]"] * (MAX_MASKS + 1)))
    # a long text is cut to what fits first: only the masks it keeps count (all 80 were refused)
    words = lm.max_length - 2 - MAX_MASKS  # text tokens that fit beside the masks kept
    long = " ".join(["[MASK]"] * MAX_MASKS + ["the"] * words + ["[MASK]"] * 40)
    result = lm.fill_mask(long, joint=False)
    assert len(result.masks) == MAX_MASKS and result.num_masks_dropped == 40
    with pytest.raises(InputError, match=f"{MAX_MASKS + 1} \\[MASK\\]s in the part of the text that fits"):
        lm.fill_mask(" ".join(["[MASK]"] * (MAX_MASKS + 1) + ["the"] * lm.max_length + ["[MASK]"] * 5))
    # every reading of the text takes [mask] as the mask, not only fill_mask (the layer view read '[')
    lower_layers = lm.layer_predictions("the cat [mask] on the mat.", top_k=3)
    assert lower_layers == lm.layer_predictions("the cat [MASK] on the mat.", top_k=3)
    assert lm.inspect("the cat [Mask] sat.").tokens.count("[MASK]") == 1
    for bad in (2.5, True, 0, "3"):  # a float top_k was torch's TypeError
        with pytest.raises(InputError, match="top_k must be a whole number"):
            lm.fill_mask("the [MASK] sat.", top_k=bad)
        with pytest.raises(InputError, match="top_k must be a whole number"):
            lm.layer_predictions("the [MASK] sat.", top_k=bad)


@pytest.mark.parametrize("bad", [123, None, b"the [MASK] sat.", 1.5, {"text": "the [MASK]"}])
def test_non_string_input_is_an_input_error(lm, bad):
    # (#14) fill_mask(123) / None raised TypeError from list(); bytes listed ints
    with pytest.raises(InputError, match="string"):
        lm.fill_mask(bad)
    with pytest.raises(InputError, match="string"):
        lm.fill_mask(["the [MASK] sat.", bad])
    with pytest.raises(InputError, match="string"):
        lm.next_sentence(bad, "the cat sat.")
    with pytest.raises(InputError, match="string"):
        lm.inspect(bad)
    with pytest.raises(InputError, match="string"):
        lm.layer_predictions(bad)


@pytest.mark.parametrize("bad", ["the [MASK] \ud800 sat.", b"the [MASK] caf\xe9".decode("utf-8", "surrogateescape")])
def test_lone_surrogate_or_invalid_utf8_is_an_input_error(lm, bad):
    # (#14) a lone surrogate reached the tokenizer and raised a traceback
    with pytest.raises(InputError, match="not valid Unicode"):
        lm.fill_mask(bad)
    with pytest.raises(InputError, match="not valid Unicode"):
        lm.next_sentence("the cat sat.", bad)
    with pytest.raises(InputError, match="not valid Unicode"):
        lm.inspect(bad)
    with pytest.raises(InputError, match="not valid Unicode"):
        lm.layer_predictions(bad)


# Sentences whose answers must not depend on the caller's precision. On the shipped model bf16
# autocast changed the top answer to the first one ("mr, true" became "true, mr"), so inference runs
# in fp32 whatever autocast is on around it.
PROBE = [
    "The capital of France is [MASK].",
    "The doctor told the [MASK] to rest.",
    "She opened the door and [MASK] into the room.",
    "The children were playing in the [MASK].",
    "My father [MASK] a doctor in London.",
    "I drank a cup of [MASK] this morning.",
    "He [MASK] the letter and put it in his pocket.",
    "The sun rises in the [MASK].",
    "They went to the [MASK] to buy bread.",
    "It was a dark and [MASK] night.",
    "The [MASK] barked at the stranger.",
    "She was born in [MASK] and grew up in Paris.",
]


def test_probe_answers_are_fp32_under_a_callers_bf16_autocast():
    lm = load_model(device="cpu")  # the shipped model
    fp32 = [[c.token for c in r.masks[0].candidates] for r in lm.fill_mask(PROBE, top_k=5)]
    nsp = lm.next_sentence("The man went to the store.", "He bought a gallon of milk.").is_next_prob
    with torch.autocast("cpu", dtype=torch.bfloat16):
        again = [[c.token for c in r.masks[0].candidates] for r in lm.fill_mask(PROBE, top_k=5)]
        nsp_again = lm.next_sentence("The man went to the store.", "He bought a gallon of milk.").is_next_prob
        on = torch.is_autocast_enabled("cpu")
        with torch.no_grad():  # a plain call of the model in this context does run in bf16
            hidden = lm.model.bert.encoder.layer[0].intermediate.dense(torch.zeros(1, lm.config.hidden_size))
    assert on and hidden.dtype == torch.bfloat16
    assert again == fp32
    assert nsp_again == nsp


def test_a_pasted_book_is_refused_with_its_length(lm):
    from bertlab.inference import MAX_TEXT_CHARS

    book = "The cat sat on the [MASK]. " + "And the dog sat by the door. " * (MAX_TEXT_CHARS // 25)
    with pytest.raises(InputError, match="at most 10,000 are read"):
        lm.fill_mask(book)
    with pytest.raises(InputError, match="sentence B has"):
        lm.next_sentence("A short one.", book)
    assert lm.fill_mask(book[: MAX_TEXT_CHARS - 10]).masks  # under the cap it is read (and truncated) as before


# --- bad arguments are InputErrors that say what to give (a reviewer's list) -------------------
def test_no_sentence_pairs_is_an_input_error(lm):
    with pytest.raises(InputError, match="no sentence pairs"):
        lm.next_sentence([], [])


@pytest.mark.parametrize("top_k", ["3", 2.5, -1, True])
def test_inspect_top_k_must_be_a_whole_number(lm, top_k):
    with pytest.raises(InputError, match="top_k must be a whole number, 0 or more"):
        lm.inspect("the cat sat.", top_k=top_k)


def test_inspect_top_k_zero_means_none_and_numpy_ints_count(lm):
    assert lm.inspect("the cat sat.", top_k=0).mlm_top == []
    assert len(lm.inspect("the cat sat.", top_k=np.int64(2)).mlm_top[1]) == 2


@pytest.mark.parametrize("position", [1.5, "1", True, [1]])
def test_layer_predictions_position_must_be_a_token_index(lm, position):
    with pytest.raises(InputError, match="position must be a whole number"):
        lm.layer_predictions("a [MASK] b", position=position)


def test_layer_predictions_takes_a_numpy_position(lm):
    ours = lm.layer_predictions("the [MASK] sat.", position=np.int64(2), top_k=2)
    assert ours == lm.layer_predictions("the [MASK] sat.", position=2, top_k=2)
    with pytest.raises(InputError, match="give 0 to"):
        lm.layer_predictions("the [MASK] sat.", position=-1)


@pytest.mark.parametrize(
    ("make", "needle"),
    [
        (lambda L, A: "abc", "head_mask is a str"),
        (lambda L, A: [["a"] * A] * L, "cannot be read as numbers"),
        (lambda L, A: object(), "cannot be read as numbers"),
        (lambda L, A: torch.full((L, A), float("nan")), "outside 0..1"),
        (lambda L, A: torch.full((L, A), float("inf")), "outside 0..1"),
        (lambda L, A: -torch.ones(L, A), "outside 0..1"),
        (lambda L, A: torch.full((L, A), 2.0), "outside 0..1"),
        (lambda L, A: torch.ones(L, A, dtype=torch.complex64), "dtype"),
    ],
)
def test_a_bad_head_mask_is_an_input_error(lm, make, needle):
    L, A = lm.config.num_layers, lm.config.num_heads
    for call in (
        lambda hm: lm.fill_mask(TEXTS[0], head_mask=hm),
        lambda hm: lm.next_sentence("the cat", "the dog", head_mask=hm),
        lambda hm: lm.inspect("the cat", head_mask=hm),
        lambda hm: lm.layer_predictions(TEXTS[0], head_mask=hm),
    ):
        with pytest.raises(InputError, match=needle):
            call(make(L, A))


def test_a_head_mask_of_lists_bools_or_fractions_is_read(lm):
    L, A = lm.config.num_layers, lm.config.num_heads
    ones = lm.fill_mask(TEXTS[0], head_mask=torch.ones(L, A)).masks
    assert lm.fill_mask(TEXTS[0], head_mask=[[1] * A] * L).masks == ones
    assert lm.fill_mask(TEXTS[0], head_mask=torch.ones(L, A, dtype=torch.bool)).masks == ones
    assert lm.fill_mask(TEXTS[0], head_mask=torch.full((L, A), 0.5)).masks != ones


def test_masks_in_the_cut_off_part_are_counted(lm):
    text = "the [MASK] sat. " + "the dog ran to the park. " * 20 + "the [MASK] and [mask] ran."
    res = lm.fill_mask(text)
    assert res.truncated and len(res.masks) == 1 and res.num_masks_dropped == 2
    kept = lm.fill_mask(["the [MASK] sat on the [MASK].", text])
    assert [r.num_masks_dropped for r in kept] == [0, 2]


def test_next_sentence_says_how_many_tokens_were_cut(lm):
    long_a = "the cat sat on the mat . " * 20
    res = lm.next_sentence(long_a, "it was big.")
    full = len(lm.tokenizer.encode(long_a, "it was big.", max_length=10_000))
    assert res.truncated and res.num_dropped == full - lm.max_length
    assert lm.next_sentence("the cat", "the dog").num_dropped == 0


@pytest.mark.parametrize("path", [5, 1.5, b"checkpoints", ["x"]])
def test_load_model_refuses_a_path_of_the_wrong_type(path):
    with pytest.raises(InputError, match="checkpoint folder"):
        load_model(path, device="cpu")


def test_load_model_takes_a_path_object_and_a_dtype_name(lm):
    from pathlib import Path

    half = load_model(Path(lm.path), device="cpu", dtype="bfloat16")
    assert next(half.model.parameters()).dtype == torch.bfloat16
    assert next(load_model(lm.path, device="cpu", dtype=torch.float64).model.parameters()).dtype == torch.float64


@pytest.mark.parametrize("dtype", [torch.int64, torch.bool, "int8", "float17", 16, None])
def test_load_model_refuses_a_dtype_that_is_not_floating(lm, dtype):
    with pytest.raises(InputError, match="dtype must be a floating-point torch dtype"):
        load_model(lm.path, device="cpu", dtype=dtype)


@pytest.mark.parametrize("device", ["xpu", "meta", "cuda:99"])
def test_load_model_refuses_a_device_this_machine_lacks(lm, device):
    if device.startswith("cuda") and not torch.cuda.is_available():
        pytest.skip("pick_device refuses cuda on a machine without one (test_other_argument_errors)")
    if device == "xpu" and getattr(torch, "xpu", None) is not None and torch.xpu.is_available():
        pytest.skip("this machine has an XPU")
    with pytest.raises(InputError, match="device"):
        load_model(lm.path, device=device)


def test_sentence_order_reads_albert_s_sop_head(tiny_albert_checkpoint, tiny_checkpoint, tokenizer):
    """ALBERT's sentence-pair head answers "are A and B in order?" (index 0 = in order, transformers'
    sentence_order_label), alone or in a batch; each head's method names the other where it is missing."""
    a, b = "the cat sat on the mat .", "it was a big cat ."
    lm = load_model(tiny_albert_checkpoint, device="cpu")
    assert lm.has_sop and not lm.has_nsp
    got = lm.sentence_order(a, b)
    enc = tokenizer.encode(a, b)
    with torch.no_grad():
        logits = lm.model(torch.tensor([enc.ids]), torch.tensor([enc.type_ids])).sop_logits  # (1, 2)
    assert got.in_order_prob == pytest.approx(float(logits.softmax(-1)[0, 0]), abs=1e-6)
    assert got.in_order == (got.in_order_prob >= 0.5)
    assert got.tokens == enc.tokens and got.segment_ids == enc.type_ids and not got.truncated
    both = lm.sentence_order([a, b], [b, a])
    assert both[0].in_order_prob == pytest.approx(got.in_order_prob, abs=1e-6)
    assert both[1].text_a == b and both[1].in_order_prob != pytest.approx(got.in_order_prob, abs=1e-6)
    with pytest.raises(InputError, match="no next-sentence head.*sentence-order head: use sentence_order"):
        lm.next_sentence(a, b)
    with pytest.raises(InputError, match="sentence B is empty"):
        lm.sentence_order(a, " ")
    with pytest.raises(InputError, match="no sentence-order head.*next-sentence head: use next_sentence"):
        load_model(tiny_checkpoint, device="cpu").sentence_order(a, b)
