"""bertlab.diagrams: the paper's diagrams drawn from a config or an example."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest

from bertlab import diagrams as D
from bertlab.config import BertConfig
from bertlab.errors import InputError


def annotation_texts(fig: go.Figure) -> list[str]:
    return [a.text for a in fig.layout.annotations if a.text]


def test_input_embeddings_figure_is_figure_2():
    tokens = ["[CLS]", "my", "dog", "[SEP]", "he", "barks", "[SEP]"]
    segments = [0, 0, 0, 0, 1, 1, 1]
    texts = annotation_texts(D.input_embeddings_figure(tokens, segments))
    assert texts.count("E<sub>A</sub>") == 4 and texts.count("E<sub>B</sub>") == 3
    assert "E<sub>6</sub>" in texts and "E<sub>dog</sub>" in texts
    punctuated = annotation_texts(D.input_embeddings_figure(["[CLS]", "dog", ".", "[SEP]"], [0, 0, 0, 0]))
    assert "E<sub>'.'</sub>" in punctuated and "E<sub>[SEP]</sub>" in punctuated  # '.' shows, quoted
    assert any("Segment" in t for t in texts) and any("Position" in t for t in texts)
    wrapped = D.input_embeddings_figure(tokens * 3, segments * 3, per_row=8)
    assert annotation_texts(wrapped).count("<b>Input</b>") == 3  # three bands
    with pytest.raises(InputError):
        D.input_embeddings_figure(tokens, segments[:-1])


def test_architecture_figure_names_the_sizes():
    small = " ".join(
        annotation_texts(
            D.architecture_figure(
                BertConfig(vocab_size=100, hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64)
            )
        )
    )
    assert "Encoder layer 2" in small and "4 heads × 8" in small and "32 → 64 → 32" in small
    fig = D.architecture_figure(BertConfig(num_layers=12))
    big = " ".join(annotation_texts(fig))
    assert "9 more layers" in big and "Encoder layer 12" in big and "Encoder layer 5" not in big
    assert "L = 12" in fig.layout.title.text
    no_nsp = " ".join(annotation_texts(D.architecture_figure(BertConfig(use_nsp_head=False))))
    assert "no NSP head" in no_nsp


def test_example_html_colours_and_escapes():
    tokens = ["[CLS]", "[MASK]", "<b>", "dog", "[SEP]"]
    original = ["[CLS]", "cat", "<b>", "sat", "[SEP]"]
    kinds = ["", "mask", "", "random", ""]
    out = D.example_html(tokens, original, kinds, [0, 0, 0, 1, 1])
    assert "&lt;b&gt;" in out and "<b>" not in out  # a token is text, never markup
    assert D.KIND_COLOURS["mask"] in out and D.KIND_COLOURS["random"] in out
    assert D.SEGMENT_B in out and "was &#x27;cat&#x27;" in out
    assert "segment A" in D.legend_html()
    with pytest.raises(InputError):
        D.example_html(tokens, original, kinds[:-1], [0] * 5)
