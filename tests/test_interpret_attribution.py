"""bertlab.interpret.attribution and .targets on tiny models: integrated gradients' completeness,
gradient x input against autograd, every kind of target, batching and the caps."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from interpret_models import finetuned, pretrained

from bertlab.errors import InputError
from bertlab.interpret.attribution import MAX_IG_STEPS, attribute, baseline_ids, shading
from bertlab.interpret.targets import AnswerSpan, InOrder, IsNext, MaskedWord, TaskLabel, as_subject, prepare


def assert_complete(a, tolerance=0.05):
    """Integrated gradients' scores add up to p(input) - p(baseline) (Sundararajan et al.'s completeness)."""
    assert a.converged, (a.delta, a.difference, a.steps)
    assert abs(a.integrated_gradients.sum() - a.difference) <= max(tolerance * abs(a.difference), 1e-4)
    assert a.delta == pytest.approx(a.integrated_gradients.sum() - a.difference, abs=1e-5)


def test_integrated_gradients_sum_to_the_difference_from_the_baseline(tokenizer):
    lm = pretrained(tokenizer)
    a = attribute(lm, "the cat sat on the [MASK] .")
    assert a.target.startswith("P(") and "[MASK] #1" in a.target
    assert len(a.tokens) == len(a.integrated_gradients) == len(a.gradient_x_input)
    assert abs(a.difference) > 1e-4  # the words matter, so the check is not 0 = 0
    assert_complete(a)
    # specials are in the baseline too: nothing to attribute to them
    specials = [i for i, t in enumerate(a.tokens) if t in ("[CLS]", "[SEP]", "[MASK]")]
    assert np.all(a.integrated_gradients[specials] == 0)


def test_nsp_label_and_span_targets_are_complete_too(tokenizer):
    assert_complete(attribute(pretrained(tokenizer), "the cat sat .", "it was big .", target=IsNext()))
    clf = finetuned(tokenizer)
    a = attribute(clf, "the dog ran to the park .", target=TaskLabel("pos"))
    assert a.target == "P(label 'pos')"
    assert_complete(a)
    tagger = finetuned(tokenizer, "tagging", ("O", "B-X"))
    assert_complete(attribute(tagger, "paris is big", target=TaskLabel(position=1)))
    qa = finetuned(tokenizer, "qa")
    span = attribute(qa, "who sang ?", "the bird sang in the tree .", target=AnswerSpan(end=True))
    assert "ends at" in span.target
    assert_complete(span)


def test_gradient_times_input_matches_autograd(tokenizer):
    lm = pretrained(tokenizer)
    text = "the dog [MASK] in the park"
    a = attribute(lm, text)
    subject = as_subject(lm)
    prep = prepare(subject, [text], None, MaskedWord())
    emb = lm.model.bert.embeddings.word_embeddings
    captured = {}

    def keep(module, args, output):
        output.retain_grad()
        captured["e"] = output

    handle = emb.register_forward_hook(keep)
    try:
        with torch.enable_grad():
            out = lm.model.bert(prep.input_ids, prep.token_type_ids, prep.attention_mask)
            hidden = out.last_hidden_state[0, prep.positions[0]]
            p = lm.model.cls.predictions(hidden).softmax(-1)[prep.classes[0]]
            p.backward()
    finally:
        handle.remove()
    expected = (captured["e"].grad * captured["e"]).sum(-1)[0].detach().numpy()
    np.testing.assert_allclose(a.gradient_x_input, expected, rtol=1e-4, atol=1e-6)
    assert a.prediction == pytest.approx(float(p.detach()), rel=1e-5)


def test_a_batch_gives_what_single_calls_give(tokenizer):
    lm = pretrained(tokenizer)
    texts = ["the cat [MASK] on the mat", "a big [MASK] ran to the house in paris"]
    batch = attribute(lm, texts, steps=16)
    for text, got in zip(texts, batch, strict=True):
        alone = attribute(lm, text, steps=16)
        assert got.tokens == alone.tokens
        np.testing.assert_allclose(got.integrated_gradients, alone.integrated_gradients, atol=1e-5)
        np.testing.assert_allclose(got.gradient_x_input, alone.gradient_x_input, atol=1e-5)


def test_steps_double_until_converged_and_stop_at_the_cap(tokenizer):
    lm = pretrained(tokenizer, std=0.5)
    strict = attribute(lm, "the quick brown fox [MASK] over the lazy dog", steps=1, max_steps=4, tolerance=1e-9)
    assert strict.steps == 4 and not strict.converged  # doubled 1 -> 2 -> 4, then gave up and said so
    loose = attribute(lm, "the quick brown fox [MASK] over the lazy dog", steps=2, tolerance=0.05)
    assert loose.converged and loose.steps >= 2


def test_a_chosen_answer_and_baseline(tokenizer):
    lm = pretrained(tokenizer)
    a = attribute(lm, "the [MASK] sat", target=MaskedWord("dog"))
    assert a.target == "P('dog' at [MASK] #1)"
    subject = as_subject(lm)
    ids = torch.tensor([[tokenizer.cls_id, 10, tokenizer.mask_id, 11, tokenizer.sep_id, tokenizer.pad_id]])
    base = baseline_ids(subject, ids)[0].tolist()
    assert base == [tokenizer.cls_id, tokenizer.pad_id, tokenizer.mask_id, tokenizer.pad_id, tokenizer.sep_id, 0]


def test_plain_messages_for_what_cannot_be_explained(tokenizer):
    lm = pretrained(tokenizer)
    with pytest.raises(InputError, match=r"\[MASK\]"):
        attribute(lm, "no mask here")
    with pytest.raises(InputError, match="not in the vocabulary"):
        attribute(lm, "the [MASK] sat", target=MaskedWord("zebra"))
    with pytest.raises(InputError, match="at most 2"):
        attribute(lm, ["the [MASK]"] * 3, max_texts=2)
    with pytest.raises(InputError, match="steps"):
        attribute(lm, "the [MASK]", steps=MAX_IG_STEPS + 1)
    with pytest.raises(InputError, match="fine-tuned"):
        attribute(lm, "the cat", target=TaskLabel())
    with pytest.raises(InputError, match="second text"):
        attribute(lm, "the cat sat", target=IsNext())
    with pytest.raises(InputError, match="labels"):
        attribute(finetuned(tokenizer), "the cat", target=TaskLabel("maybe"))


def test_shading_scales_to_one():
    np.testing.assert_allclose(shading(np.array([0.5, -2.0, 1.0])), [0.25, -1.0, 0.5])
    assert not shading(np.zeros(3)).any()


def test_a_baseline_that_scores_higher_is_said_how_to_read(tokenizer):
    """An all-[PAD] pair can score higher on IsNext than the real pair; then red words pull the answer
    down from the baseline's, and the page says so instead of leaving 'lowered IsNext' to be misread."""
    import dataclasses

    from bertlab.interpret.answer_views import attribution_figure, baseline_reading

    a = attribute(pretrained(tokenizer), "the cat sat .", "it was big .", target=IsNext())
    above = dataclasses.replace(a, prediction=0.768, baseline_prediction=0.996)
    text = baseline_reading(above)
    assert "0.996" in text and "0.768" in text and f"*lower* {a.target} from it by 0.228" in text
    assert baseline_reading(dataclasses.replace(a, prediction=0.9, baseline_prediction=0.5)) == ""
    level = baseline_reading(dataclasses.replace(a, prediction=0.0112, baseline_prediction=0.0110))
    assert "almost alike" in level  # a 0.011 answer against a 0.011 baseline: every score near zero
    assert "from the baseline" in attribution_figure(a).layout.yaxis.title.text  # a change, not a share


def test_second_texts_pair_up_with_texts_or_are_refused(tokenizer):
    lm = pretrained(tokenizer)
    texts = ["the cat sat on the mat", "a dog ran"]
    # a string with a list of texts used to be split into its characters, one per text
    with pytest.raises(InputError, match="text_b must be a list of 2"):
        attribute(lm, texts, text_b="ab", target=IsNext(), steps=2)
    with pytest.raises(InputError, match="2 texts but 1 second texts"):
        attribute(lm, texts, text_b=["the bird sang"], target=IsNext(), steps=2)
    with pytest.raises(InputError, match="text_b must be one string"):
        attribute(lm, texts[0], text_b=["the bird sang"], target=IsNext(), steps=2)
    pairs = attribute(lm, texts, text_b=["the bird sang", "in the park"], target=IsNext(), steps=2, max_steps=2)
    assert [a.text_b for a in pairs] == ["the bird sang", "in the park"]


def test_bad_arguments_are_input_errors(tokenizer):
    lm = pretrained(tokenizer)
    for text in (None, 5):
        with pytest.raises(InputError, match="string or a list of strings"):
            attribute(lm, text)
    for steps in (2.5, "4", True, 0):
        with pytest.raises(InputError, match="steps must be a whole number between 1 and"):
            attribute(lm, "the [MASK] sat", steps=steps)
    with pytest.raises(InputError, match="MaskedWord.*IsNext"):
        attribute(lm, "the [MASK] sat", target="mask", steps=2)
    with pytest.raises(InputError, match="tolerance"):
        attribute(lm, "the [MASK] sat", tolerance="small")


def test_targets_refuse_negative_or_fractional_indices():
    with pytest.raises(InputError, match="mask.*at least 0, got -1"):
        MaskedWord(mask=-1)  # used to pick the last mask and call it "#0"
    with pytest.raises(InputError, match="mask"):
        MaskedWord(mask=0.5)
    with pytest.raises(InputError, match="token"):
        MaskedWord(token=3)
    with pytest.raises(InputError, match="position"):
        TaskLabel(position=1.5)  # a tensor would silently round it down
    assert MaskedWord(mask=1).mask == 1 and TaskLabel(position=2).position == 2


def test_a_masked_word_is_explained_for_a_family_without_bert_s_heads(tokenizer):
    """ALBERT's masked-LM head is not `cls.predictions`: the target reads every family's `layer_logits`."""
    import dataclasses

    from conftest import tiny_config

    from bertlab.inference import LoadedModel
    from bertlab.models import albert

    fields = dataclasses.asdict(tiny_config(len(tokenizer), initializer_range=0.2)) | {"use_nsp_head": False}
    torch.manual_seed(0)
    lm = LoadedModel(albert.build(albert.AlbertConfig(**fields, embedding_size=16)), tokenizer)
    a = attribute(lm, "the cat sat on the [MASK] .")
    assert abs(a.difference) > 1e-4
    assert_complete(a)
    with pytest.raises(InputError, match=r"no next sentence prediction head; it has sentence order prediction"):
        attribute(lm, "the cat sat .", "it was big .", target=IsNext())
    # its own sentence-pair head instead: P(in order), the number sentence_order reads, the default for a pair
    pair = attribute(lm, "the cat sat .", "it was big .")
    assert pair.target == "P(in order)"
    assert pair.prediction == pytest.approx(lm.sentence_order("the cat sat .", "it was big .").in_order_prob, abs=1e-5)
    assert_complete(pair)
    with pytest.raises(
        InputError,
        match=r"no sentence order prediction head; it has next sentence prediction: explain that \(IsNext\(\)\)",
    ):
        attribute(pretrained(tokenizer), "the cat sat .", "it was big .", target=InOrder())


def test_a_discriminator_is_told_what_it_has(tiny_electra_pair):
    """An ELECTRA discriminator has replaced-token detection only: no [MASK] to explain instead."""
    from bertlab.inference import load_model

    lm = load_model(tiny_electra_pair / "discriminator", device="cpu")
    for target in (IsNext(), InOrder()):
        with pytest.raises(InputError, match=r"it has replaced-token detection \(the Fill-mask page") as raised:
            attribute(lm, "the cat sat .", "it was big .", target=target)
        assert "[MASK]" not in str(raised.value)
    with pytest.raises(InputError, match=r"needs a masked-LM head, and .* has replaced-token detection"):
        lm.fill_mask("the cat sat on the [MASK] .")
