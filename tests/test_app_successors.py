"""The pages with the successors' own heads, under AppTest on tiny random models (tests/test_app.py's
recipe: the app_env fixture, the typed-folder picker): an ELECTRA discriminator's replaced-token view
on Fill-mask (a discriminator folder alone, and a pair folder's discriminator half beside the
generator's answers), and ALBERT's sentence-order head on Next sentence."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("streamlit")
from test_app import FILL, NSP, app_env, assert_clean, messages, open_page, plotly_charts  # noqa: E402, F401  (app_env: a fixture)


def _pick(at, folder) -> None:
    at.selectbox(key="bertlab_model_choice").set_value("__other__").run()
    at.text_input(key="bertlab_model_typed").input(str(folder)).run()


def _replaced_bars(at) -> list[dict]:
    return [
        json.loads(c.proto.spec)["data"][0]
        for c in plotly_charts(at)
        if "P(replaced)" in json.loads(c.proto.spec)["data"][0].get("hovertemplate", "")
    ]


def test_a_discriminator_shows_p_replaced_for_a_typed_sentence(app_env, tiny_electra_pair):  # noqa: F811
    at = open_page()
    _pick(at, tiny_electra_pair / "discriminator")
    at.switch_page(FILL).run()
    assert_clean(at)
    assert "ELECTRA **discriminator**" in messages(at) and "cannot fill a [MASK]" in messages(at)
    assert at.segmented_control(key="rtd_mode").options == ["Type a sentence"]  # no generator to corrupt with
    (bars,) = _replaced_bars(at)
    assert len(bars["y"]) == len(at.text_area(key="rtd_text").value.rstrip(".").split()) + 1  # words and '.'
    assert all(0 <= y <= 1 for y in bars["y"])
    assert not [s for s in at.slider if s.key == "fm_topk"]  # no fill-mask controls for a model without a masked LM
    at.text_area(key="rtd_text").input("  ").run()
    assert not at.exception and "empty" in messages(at)


def test_a_pair_answers_with_its_generator_and_corrupts_with_it_for_its_discriminator(app_env, tiny_electra_pair):  # noqa: F811
    at = open_page()
    _pick(at, tiny_electra_pair)
    at.switch_page(FILL).run()
    assert_clean(at)
    assert at.slider(key="fm_topk").value > 0  # fill-mask answers: the generator's
    assert any("ELECTRA pair" in e.label for e in at.expander)
    assert any("its **generator**" in c.value and "its **discriminator**" in c.value for c in at.caption)
    at.segmented_control(key="rtd_mode").set_value("Let the generator corrupt one").run()
    assert_clean(at)
    labels = [m.label for m in at.metric]
    assert "Really replaced" in labels and "Discriminator right on" in labels
    (bars,) = _replaced_bars(at)
    replaced = [x for x in bars["x"] if "(was " in x]
    assert replaced and len(replaced) <= len(bars["x"])
    first = bars["y"]
    at.number_input(key="rtd_seed").set_value(5).run()  # another corruption
    assert_clean(at)
    assert _replaced_bars(at)[0]["y"] != first


def test_a_bert_has_no_replaced_token_view(app_env):  # noqa: F811
    at = open_page(FILL)
    assert_clean(at)
    assert not [e for e in at.expander if "ELECTRA" in e.label]
    assert not [s for s in at.segmented_control if s.key == "rtd_mode"]


def test_albert_s_sentence_order_head_answers_are_a_and_b_in_order(app_env, tiny_albert_checkpoint):  # noqa: F811
    at = open_page()
    _pick(at, tiny_albert_checkpoint)
    at.switch_page(NSP).run()
    assert_clean(at)
    assert at.metric[0].label == "P(in order)"
    value = at.metric[0].value
    assert value.endswith("%") and 0 <= float(value.rstrip("%")) <= 100
    assert any("Are A and B in order?" in m.value for m in at.markdown)
    assert any("the other way round, B then A" in m.value for m in at.markdown)
    assert any("Sentence order prediction" in m.value for m in at.markdown)  # the concept box says SOP
    bars = [json.loads(c.proto.spec)["data"] for c in plotly_charts(at)]
    assert [d["name"] for d in bars[0]] == ["In order", "Swapped"]
    assert len(bars) == 2  # the SOP bar and the Figure 2 input diagram
    assert not at.table  # no "unrelated sentences" check: SOP's B is never from another document


def test_a_model_without_a_sentence_pair_head_names_what_its_family_has(app_env, tiny_electra_pair):  # noqa: F811
    at = open_page()
    _pick(at, tiny_electra_pair)
    at.switch_page(NSP).run()
    assert_clean(at)
    note = messages(at)
    assert "This ELECTRA checkpoint has no sentence-pair head" in note and "it has masked LM" in note
    assert "Fill-mask page uses its masked LM" in note
    assert not at.metric and len(plotly_charts(at)) == 1  # the input diagram still draws


def test_a_bert_keeps_next_sentence_prediction(app_env):  # noqa: F811
    at = open_page(NSP)
    assert_clean(at)
    assert at.metric[0].label == "P(IsNext)" and len(at.table[0].value) == 4


def test_an_in_order_example_is_marked_right_or_wrong_for_sentence_order(app_env, tiny_albert_checkpoint):  # noqa: F811
    at = open_page()
    _pick(at, tiny_albert_checkpoint)
    at.switch_page(NSP).run()
    assert at.selectbox(key="nsp_example").placeholder.startswith("Pick a pair (an IsNext pair is in order)")
    at.selectbox(key="nsp_example").set_value(at.selectbox(key="nsp_example").options[0]).run()
    assert_clean(at)
    assert any("in this pair B follows A in the text" in m.value for m in at.markdown)


@pytest.fixture(scope="module")
def tiny_roberta(tmp_path_factory):
    """A random tiny RoBERTa (transformers' RobertaForMaskedLM) with a byte-level BPE trained here."""
    transformers = pytest.importorskip("transformers")
    import torch
    from conftest import SAMPLE_TEXT

    from bertlab.models.roberta_tokenizer import RobertaTokenizer

    bpe = RobertaTokenizer.train(texts=SAMPLE_TEXT * 20, vocab_size=320)
    config = transformers.RobertaConfig(
        vocab_size=len(bpe), hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=40, type_vocab_size=1, pad_token_id=1,
    )  # fmt: skip
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("roberta") / "roberta"
    transformers.RobertaForMaskedLM(config).save_pretrained(folder)
    bpe.save(folder)
    return folder


def test_roberta_answers_read_as_words_on_fill_mask(app_env, tiny_roberta):  # noqa: F811
    at = open_page()
    _pick(at, tiny_roberta)
    at.switch_page(FILL).run()
    at.text_area(key="fm_text").input("The cat sat on the [MASK] and the [MASK] ran.").run()
    assert_clean(at)
    answers = json.loads(plotly_charts(at)[0].proto.spec)["data"][0]["y"]
    assert answers and not [w for w in answers if "Ġ" in w]  # 'mat', not 'Ġmat'
    filled = " ".join(m.value for m in at.markdown if m.value.startswith("> "))
    assert filled.count("The cat sat on the ") == 2 and "Ġ" not in filled  # independently and jointly
