"""RoBERTa's byte-level pieces read as text on every page (tokenizer.readable_tokens, the one display
function): 'Ġmat' is drawn '␣mat', a newline 'Ċ' '↵', an answer 'mat'; the raw 'Ġ'/'Ċ' reach no page.
AppTest on a tiny random RoBERTa (test_app_successors' folder, test_app's recipe)."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from test_app import EXAMPLE, FILL, NSP, app_env, assert_clean, open_page  # noqa: E402, F401  (app_env: a fixture)
from test_app_successors import _pick, tiny_roberta  # noqa: E402, F401  (tiny_roberta: a fixture)

from bertlab.app_pages import page_titled  # noqa: E402

WHY, COMPARE, LAYERS = (page_titled(t).file for t in ("Why it answered", "Compare models", "What each layer knows"))
RAW = ("Ġ", "\\u0120", "\\304\\240", "Ċ", "\\u010a", "\\304\\212")  # the pieces' own alphabet, as protos spell it
VISIBLE = ("␣", "\\u2423", "\\342\\220\\243")


def _drawn(at) -> str:
    """Every element the page drew (markdown, captions, HTML, charts' specs, tables' Arrow bytes) as text."""
    out = []

    def walk(node) -> None:
        for child in (getattr(node, "children", None) or {}).values():
            walk(child)
        if getattr(node, "proto", None) is not None:
            out.append(str(node.proto))

    walk(at._tree)
    return "\n".join(out)


def _assert_read_as_text(at) -> None:
    assert_clean(at)
    drawn = _drawn(at)
    raw = [r for r in RAW if r in drawn]
    assert not raw, [drawn[max(0, drawn.find(r) - 150) : drawn.find(r) + 150] for r in raw]
    assert any(v in drawn for v in VISIBLE)  # the pieces are shown, with their spaces made visible


def _open(folder, page):
    at = open_page()
    _pick(at, folder)
    at.switch_page(page).run()
    return at


def test_fill_mask_echoes_pieces_and_answers_words(app_env, tiny_roberta):  # noqa: F811
    at = _open(tiny_roberta, FILL)
    at.text_area(key="fm_text").input("The cat sat on the [MASK].\nThe dog ran to the [MASK].").run()
    _assert_read_as_text(at)
    (echo,) = [c.value for c in at.caption if "input of" in c.value]
    assert "`␣cat`" in echo and "`↵`" in echo and "`<mask>`" in echo
    at.toggle(key="fm_words").set_value(False).run()  # the answers as pieces, not whole words
    _assert_read_as_text(at)


def test_why_it_answered_shades_pieces(app_env, tiny_roberta):  # noqa: F811
    at = _open(tiny_roberta, WHY)
    _assert_read_as_text(at)
    shaded = [m.value for m in at.markdown if "<span title=" in m.value]
    assert len(shaded) == 2 and all(">␣" in s for s in shaded)
    assert at.selectbox(key="why_answer").options  # the answers to explain, as pieces


def test_how_an_example_is_made_shows_pieces(app_env, tiny_roberta):  # noqa: F811
    at = _open(tiny_roberta, EXAMPLE)
    _assert_read_as_text(at)


@pytest.mark.parametrize("page", [NSP, COMPARE])
def test_the_other_pages_that_draw_tokens(app_env, tiny_roberta, page):  # noqa: F811
    _assert_read_as_text(_open(tiny_roberta, page))


def test_what_each_layer_knows_names_neuron_factors_by_pieces(app_env, tiny_roberta):  # noqa: F811
    at = _open(tiny_roberta, LAYERS)
    at.session_state["layers_tab"] = "Feed-forward neurons"  # what clicking the tab does
    at.run()
    _assert_read_as_text(at)
    assert any(m.value.startswith("**factor 1: ") for m in at.markdown)


def test_readable_tokens_shows_white_space():
    from conftest import SAMPLE_TEXT

    from bertlab.models.roberta_tokenizer import RobertaTokenizer

    bpe = RobertaTokenizer.train(texts=SAMPLE_TEXT * 5, vocab_size=300)
    assert bpe.readable_tokens(["Ġmat", "Ċ", "ĉ", "<s>", "<mask>", "Ã©", "cat"]) == [
        "␣mat", "↵", "⇥", "<s>", "<mask>", "é", "cat",
    ]  # fmt: skip
    # a byte that is half of 'é' shows its value, not '�' (which every such byte would read alike)
    assert bpe.readable_tokens(["Ã", "©", "ĠcafÃ"]) == ["<0xC3>", "<0xA9>", "␣caf<0xC3>"]
    cafe = bpe.readable_tokens(bpe.encode("café").tokens)
    assert "".join(cafe[1:-1]) in ("café", "caf<0xC3><0xA9>")  # as the vocabulary splits it


def test_plotly_draws_roberta_s_special_tokens_as_written():
    """Plotly reads '<s>' in a label as strike-through markup: the token would vanish from the axis."""
    import numpy as np

    from bertlab.figures.answers import probability_bar
    from bertlab.figures.attention import attention_heatmap
    from bertlab.inference import Candidate

    heatmap = attention_heatmap(["<s>", "␣cat", "</s>"], np.full((3, 3), 1 / 3))
    assert list(heatmap.layout.xaxis.ticktext) == ["&lt;s&gt;", "␣cat", "&lt;/s&gt;"]
    bar = probability_bar([Candidate("</s>", 2, 0.5, "</s>", "</s>")])
    assert list(bar.data[0].y) == ["&lt;/s&gt;"]


def test_an_answer_s_pieces_are_spelled_together():
    """'Ã' and '©' are the two bytes of 'é': spelled one at a time each is half a character ('��')."""
    from conftest import SAMPLE_TEXT

    from bertlab.models.roberta_tokenizer import RobertaTokenizer

    bpe = RobertaTokenizer.train(texts=SAMPLE_TEXT * 5, vocab_size=300)
    tokens = ["<s>", "Ġcaf", "Ã", "©", "Ġis", "</s>"]
    assert bpe.whole_word(tokens, 3, "©") == "é" and bpe.whole_word(tokens, 2, "Ã") == "é"
    assert bpe.whole_word(["<s>", "Ġthe", "<mask>", "</s>"], 2, "Ã") == "<0xC3>"  # half a character, said so
    assert bpe.whole_word(["<s>", "Ġthe", "<mask>", "</s>"], 2, "Ġmat") == "mat"


def test_a_learning_history_keeps_the_pieces_as_drawn(tiny_roberta):  # noqa: F811
    """Watch it learn draws the attention tokens a history stored when the run's snapshots were probed."""
    from bertlab.inference import load_model
    from bertlab.training.history import Probes, probe_model

    lm = load_model(tiny_roberta, device="cpu")
    snapshot = probe_model(lm, Probes(fill_mask=("The cat sat on the [MASK].",), pairs=(), attention=("The cat sat.",)))
    tokens, _ = snapshot.attention_maps(0)
    assert tokens[0] == "<s>" and "␣cat" in tokens and not [t for t in tokens if "Ġ" in t]
