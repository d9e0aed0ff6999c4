"""bertlab/ablations/view.py: the paper's tables and ours beside them, as rows and a figure."""

import pytest

from bertlab.ablations.paper import PAPER
from bertlab.ablations.view import (
    agreement,
    comparison_by_task,
    curves_figure,
    paper_rows,
    pretraining_note,
    results_figure,
)


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
    table = comparison_by_task("table5", rows, {"mlm_nsp": "tiny, 4.0M tokens"})
    assert [r["variant"] for r in table][:2] == ["MLM + NSP (tiny, 4.0M tokens)", "No NSP"]  # not BERT-base
    assert table[0]["verdict"] == "baseline row" and table[1]["verdict"].startswith("✓")
    counts = agreement("table5", rows)
    assert counts["compared"] == counts["reproduced"] + counts["not_reproduced"] == 1
    assert results_figure("table5", rows).data


def test_verdict_cells_are_short_and_the_whole_sentence_is_kept():
    from bertlab.ablations.comparison import verdicts
    from bertlab.ablations.view import verdict_rows

    rows = _rows({"mlm_nsp": [80, 81, 82], "no_nsp": [70, 71, 72]})
    cell = comparison_by_task("table5", rows)[1]["verdict"]
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
    assert list(fig.data[0].x) == ["80/0/20"]  # the difference from the baseline row, 80/10/10
    assert list(fig.data[0].y) == [-20.0]
    assert fig.layout.xaxis.title.text == "[MASK] / same / random (%)"


def test_differences_are_drawn_from_zero_with_error_bars_on_a_readable_scale():
    rows = _rows({"mlm_nsp": [80, 81, 82], "no_nsp": [80, 81, 83]})
    fig = results_figure("table5", rows)
    ours, paper = fig.data
    assert ours.y[0] == pytest.approx(1 / 3) and ours.error_y.array[0] > 0  # a third of a point, with its noise
    assert paper.y[0] == pytest.approx(84.9 - 88.4)  # the paper's QNLI difference, on the same axis
    lo, hi = fig.layout.yaxis.range
    assert lo < -3.5 and hi > 3.5 and fig.layout.yaxis.zeroline  # zero in the middle, not a cliff


def test_column_widths_fit_every_header():
    from bertlab.ablations.view import column_widths

    widths = column_widths([{"variant": "x", "squad (f1): verdict": "✓ ours -1.0, paper -10.7"}])
    assert widths["squad (f1): verdict"] >= 7 * len("✓ ours -1.0, paper -10.7") and widths["variant"] >= 7 * 7


def test_panels_in_points_share_one_scale():
    rows = _rows({"mlm_nsp": [80, 81, 82], "no_nsp": [70, 71, 72]}) + [
        {**r, "task": "mrpc"} for r in _rows({"mlm_nsp": [60, 61, 62], "no_nsp": [61, 62, 63]})
    ]
    fig = results_figure("table5", rows)
    assert fig.layout.yaxis.range == fig.layout.yaxis2.range and fig.layout.yaxis.range[1] > 10
    # the pretraining panel keeps its own: Table 8's 100% random at -21.6 points flattened its UPOS gaps of 0.3-3
    pre = [
        {"table": "table8", "variant": v, "task": "pretraining", "metric": "mlm_acc", "value": x, "seed": 0, "run": v}
        for v, x in (("mask80_same10_rnd10", 35.0), ("rnd100", 14.0))
    ]
    upos = [
        {**r, "table": "table8", "task": "upos", "metric": "accuracy", "value": x, "variant": v, "seed": s}
        for (v, xs) in (("mask80_same10_rnd10", (92.0, 92.1, 92.2)), ("rnd100", (89.0, 89.1, 89.2)))
        for s, x in enumerate(xs)
        for r in [{"run": v}]
    ]
    fig = results_figure("table8", pre + upos)
    assert fig.layout.yaxis.range[0] < -21 and -4 < fig.layout.yaxis2.range[0] < -3.2  # UPOS's -3 fills its panel


def test_table6_differences_are_from_our_smallest_shape():
    rows = [
        {"table": "table6", "variant": v, "task": "sst2", "metric": "accuracy", "value": x, "seed": 0, "run": v}
        for v, x in (("L2-H128-A2", 60.0), ("L4-H256-A4", 63.0))
    ]
    fig = results_figure("table6", rows)
    assert list(fig.data[0].x) == ["L4-H256-A4"] and list(fig.data[0].y) == [3.0]
    assert "#L=2 #H=128 #A=2" in fig.layout.title.text  # the smallest shape, named as the paper names shapes


def test_pretraining_curves_show_the_plateau_line_and_tell_left_to_right_rows_apart():
    curves = {
        "mlm_nsp": [{"tokens": 1_000_000, "mlm_acc": 11.0}, {"tokens": 9_000_000, "mlm_acc": 22.5}],
        "ltr": [{"tokens": 1_000_000, "mlm_acc": 9.0}, {"tokens": 9_000_000, "mlm_acc": 18.0}],
    }
    fig = curves_figure("table5", curves)
    mlm, ltr = fig.data
    assert list(mlm.x) == [1.0, 9.0] and list(mlm.y) == [11.0, 22.5] and mlm.line.dash == "solid"
    assert ltr.line.dash == "dot" and "next-word" in ltr.name
    assert [s.y0 for s in fig.layout.shapes] == [20.0]  # the line a masked-LM row must pass
    assert fig.layout.yaxis.range[1] > 22.5


def test_the_pretraining_column_is_named_by_what_it_holds():
    """Table 6's pretraining column is perplexity (the paper's LM (ppl)); the others' is accuracy."""
    assert "perplexity, lower is better" in pretraining_note("table6")
    assert "masked-token accuracy" in pretraining_note("table8") and "perplexity" not in pretraining_note("table8")


def test_table6_shapes_are_named_alike_in_the_table_the_verdicts_and_the_agreement():
    from bertlab.ablations.comparison import verdicts
    from bertlab.ablations.view import agreement_text, verdict_rows

    rows = [
        {"table": "table6", "variant": v, "task": "sst2", "metric": "accuracy", "value": x, "seed": s, "run": v}
        for v, xs in (("L2-H128-A2", (60.0, 60.5)), ("L2-H256-A4", (65.0, 65.5)))
        for s, x in enumerate(xs)
    ]
    what = {"L2-H256-A4": "16.0M tokens"}
    assert comparison_by_task("table6", rows, what)[1]["variant"] == "#L=2 #H=256 #A=4 (16.0M tokens)"
    assert verdict_rows(verdicts("table6", rows), "table6", what)[0]["variant"] == "#L=2 #H=256 #A=4 (16.0M tokens)"
    assert "#L=2 #H=256 #A=4 on sst2" in agreement_text("table6", rows)


def test_table7_rows_are_named_as_ours_in_the_table_and_the_agreement():
    """Our learned sum of every layer is not the paper's 'All 12 Layers': our models have 2-8."""
    from bertlab.ablations.comparison import verdicts
    from bertlab.ablations.view import agreement_text, verdict_rows

    rows = [
        {"table": "table7", "variant": v, "task": "upos", "metric": "accuracy", "value": x, "seed": s, "run": v}
        for v, xs in (("finetune", (90.0, 90.2)), ("mix", (91.0, 91.2)))
        for s, x in enumerate(xs)
    ]
    said = agreement_text("table7", rows)
    assert "Feature-based: Weighted Sum All Layers on upos" in said and "12" not in said
    assert (
        verdict_rows(verdicts("table7", rows), "table7", {})[-1]["variant"] == "Feature-based: Weighted Sum All Layers"
    )


def test_size_order_text_says_which_columns_grow_with_size_and_where_not():
    from bertlab.ablations.view import size_order_text

    rows = [
        {"table": "table6", "variant": v, "task": t, "metric": m, "value": x, "seed": s, "run": v}
        for v, t, m, xs in (
            ("L2-H128-A2", "pretraining", "mlm_perplexity", (300.0,)),
            ("L4-H128-A2", "pretraining", "mlm_perplexity", (200.0,)),
            ("L2-H256-A4", "pretraining", "mlm_perplexity", (150.0,)),
            ("L2-H128-A2", "sst2", "accuracy", (60.0, 61.0)),
            ("L4-H128-A2", "sst2", "accuracy", (66.0, 67.0)),
            ("L2-H256-A4", "sst2", "accuracy", (62.0, 63.0)),
        )
        for s, x in enumerate(xs)
    ]
    text = size_order_text("table6", rows)
    assert "Held-out perplexity: better or level at every step in size (rank correlation with size -1.00)" in text
    assert "SST-2 accuracy: not monotone" in text
    assert "#L=2 #H=256 #A=4 (62.5) is worse than the smaller #L=4 #H=128 #A=2 (66.5)" in text
    assert size_order_text("table6", rows[:1]) == ""  # one shape: nothing to say


def test_the_left_to_right_rows_pretraining_score_is_not_drawn_as_a_difference():
    """Its held-out score is next-token accuracy, another task: no bar against the masked-LM baseline."""
    rows = [
        {"table": "table5", "variant": v, "task": "pretraining", "metric": "mlm_acc", "value": x, "seed": 0, "run": v}
        for v, x in (("mlm_nsp", 35.0), ("no_nsp", 40.0), ("ltr", 22.0))
    ]
    fig = results_figure("table5", rows)
    assert [list(t.x) for t in fig.data if t.type == "bar"] == [["No NSP"]]


def test_our_table_by_task_fits_five_columns_and_says_every_cell():
    """A row per variant took three columns a task (19 for Table 5): the verdicts sat off the page and
    cells were cut mid-value. By task, five columns: each task's rows together, the baseline's first."""
    from bertlab.ablations.view import comparison_by_task

    rows = _rows({"mlm_nsp": [80, 81, 82], "no_nsp": [70, 71, 72]})
    rows += [{**r, "task": "rte"} for r in _rows({"mlm_nsp": [50, 51], "no_nsp": [55, 56]})]  # no paper column
    table = comparison_by_task("table5", rows, {"mlm_nsp": "tiny, 4.0M tokens"})
    assert [list(r) for r in table] == [["task", "variant", "ours", "paper", "verdict"]] * 4
    assert [(r["task"], r["variant"]) for r in table] == [
        ("qnli (accuracy)", "MLM + NSP (tiny, 4.0M tokens)"),
        ("qnli (accuracy)", "No NSP"),
        ("rte (accuracy)", "MLM + NSP (tiny, 4.0M tokens)"),
        ("rte (accuracy)", "No NSP"),
    ]
    assert table[1] == {
        "task": "qnli (accuracy)",
        "variant": "No NSP",
        "ours": "71.0 ± 1.0 (n=3)",
        "paper": "84.9",
        "verdict": "✓ ours -10.0, paper -3.5",
    }
    assert table[0]["verdict"] == "baseline row" and table[0]["paper"] == "88.4"
    assert table[3]["paper"] == "—" and table[3]["verdict"] == "ours +5.0"
    assert all(isinstance(v, str) and v not in ("", "None") for r in table for v in r.values())


def test_every_verdict_says_a_missing_number_as_a_dash():
    from bertlab.ablations.comparison import verdicts
    from bertlab.ablations.view import verdict_rows

    rows = _rows({"mlm_nsp": [80, 81, 82], "no_nsp": [70, 71, 72]})
    rows += [{**r, "task": "rte"} for r in _rows({"mlm_nsp": [50, 51], "no_nsp": [55, 56]})]
    qnli, rte = verdict_rows(verdicts("table5", rows), "table5")
    assert (qnli["ours"], qnli["ours vs baseline"], qnli["paper vs baseline"]) == ("71.00", "-10.00", "-3.5")
    assert rte["paper vs baseline"] == "—" and "None" not in str(list(rte.values()))
