"""bertlab.figures.diagrams: the paper's diagrams drawn from a config or an example."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest

from bertlab.config import BertConfig
from bertlab.errors import InputError
from bertlab.figures import diagrams as D


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


def test_figure_2_of_a_long_pair_draws_the_ends_of_each_sentence_at_their_real_positions():
    """A 512-token pair drew 512 columns of boxes (an 8,000 px page); now [CLS], the first and last
    tokens of each sentence and the [SEP]s, with ellipsis boxes that say how many are left out."""
    tokens = ["[CLS]"] + [f"a{i}" for i in range(300)] + ["[SEP]"] + [f"b{i}" for i in range(200)] + ["[SEP]"]
    segments = [0] * 302 + [1] * 201
    drawn = D.figure2_columns(segments)
    ends = D.FIGURE2_ENDS
    assert drawn.total == 503 and drawn.shown == 4 * ends and drawn.left_out == 503 - 4 * ends
    gaps = [c for c in drawn.columns if c.is_gap]
    assert [(g.start, g.stop, g.segment) for g in gaps] == [(ends, 302 - ends, 0), (302 + ends, 503 - ends, 1)]
    fig = D.input_embeddings_figure(tokens, segments)
    texts = annotation_texts(fig)
    assert texts.count("<b>Input</b>") == 1 and fig.layout.height < 300  # one band, not 32
    for position in (0, 1, 301, 302, 304, 500, 502):  # [CLS], a0, [SEP], b0, b2, b198, [SEP]
        assert f"E<sub>{position}</sub>" in texts
    assert "E<sub>3</sub>" not in texts and "E<sub>a3</sub>" not in texts
    assert texts.count("E<sub>[SEP]</sub>") == 2 and "E<sub>[CLS]</sub>" in texts
    assert f"E<sub>{ends}–{301 - ends}</sub>" in texts and f"<i>{302 - 2 * ends} more</i>" in texts
    assert texts.count("E<sub>A</sub>") == 2 * ends + 1 and texts.count("E<sub>B</sub>") == 2 * ends + 1
    every = D.input_embeddings_figure(tokens[:40], segments[:40], ends=None)
    assert "E<sub>39</sub>" in annotation_texts(every)  # None: every token, as before
    with pytest.raises(InputError):
        D.figure2_columns(segments, ends=0)
