"""bertlab/ablations/view.py: the paper's tables and ours beside them, as rows and a figure."""

from bertlab.ablations.paper import PAPER
from bertlab.ablations.view import agreement, comparison_rows, paper_rows, results_figure


def _rows(values):
    return [
        {"table": "table5", "variant": v, "task": "qnli", "metric": "accuracy", "value": x, "seed": s, "run": f"{v}{s}"}
        for v, xs in values.items()
        for s, x in enumerate(xs)
    ]


def test_paper_rows_are_the_printed_table():
    rows = paper_rows("table5")
    assert len(rows) == len(PAPER["table5"].rows) and set(PAPER["table5"].columns) <= set(rows[0])


def test_our_rows_beside_the_paper_with_verdicts():
    rows = _rows({"mlm_nsp": [80, 81, 82], "no_nsp": [70, 71, 72]})
    table = comparison_rows("table5", rows)
    assert [r["variant"] for r in table][:2] == [label for _, label, _ in PAPER["table5"].rows][:2]
    assert any("verdict" in k for k in table[1])
    counts = agreement("table5", rows)
    assert counts["compared"] == counts["reproduced"] + counts["not_reproduced"] == 1
    assert results_figure("table5", rows).data


def test_verdict_cells_are_short_and_the_whole_sentence_is_kept():
    from bertlab.ablations.results import verdicts
    from bertlab.ablations.view import verdict_rows

    rows = _rows({"mlm_nsp": [80, 81, 82], "no_nsp": [70, 71, 72]})
    cell = comparison_rows("table5", rows)[1]["qnli (accuracy): verdict"]
    assert cell == "✓ ours -10.0, paper -3.5"
    assert "direction reproduced" in verdict_rows(verdicts("table5", rows), "table5")[0]["verdict"]


def test_each_table_gets_its_own_pretraining_note():
    from bertlab.ablations.view import pretraining_note

    assert "next-token" in pretraining_note("table5") and "BiLSTM" in pretraining_note("table5")
    assert "next-token" not in pretraining_note("table8") and "BiLSTM" not in pretraining_note("table8")


def test_table8_figure_names_the_mixes_briefly():
    rows = [
        {"table": "table8", "variant": v, "task": "upos", "metric": "accuracy", "value": x, "seed": 0, "run": v}
        for v, x in (("mask80_same10_rnd10", 60.0), ("mask80_rnd20", 40.0))
    ]
    fig = results_figure("table8", rows)
    assert list(fig.data[0].x) == ["80/10/10", "80/0/20"]
    assert fig.layout.xaxis.title.text == "[MASK] / same / random (%)"
