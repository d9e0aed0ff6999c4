"""bertlab/ablations_view.py: the paper's tables and ours beside them, as rows and a figure."""

from bertlab.ablations_view import agreement, comparison_rows, paper_rows, results_figure
from bertlab.paper_tables import PAPER


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
