"""bertlab/ablations/paper.py: the paper's Tables 5-8 as printed, and how our task columns map onto them."""

import re

import pytest

from bertlab.ablations.paper import DATA_NOTES, PAPER, PAPER_COLUMN, SHORT_LABELS, short_label, variant_label


@pytest.mark.parametrize("key", sorted(PAPER))
def test_every_table_is_whole(key):
    table = PAPER[key]
    assert table.key == key and len(table.metrics) == len(table.columns)
    assert all(len(values) == len(table.columns) for _, _, values in table.rows)
    assert table.baseline in {variant for variant, _, _ in table.rows}
    assert not table.higher_is_better or len(table.higher_is_better) == len(table.columns)


def test_our_columns_name_the_papers_columns():
    assert set(PAPER_COLUMN) == set(PAPER)
    for key, mapping in PAPER_COLUMN.items():
        assert set(mapping.values()) <= set(PAPER[key].columns), key
    assert set(DATA_NOTES) <= {task for mapping in PAPER_COLUMN.values() for task in mapping}


def test_variant_label_is_the_papers_row_label():
    assert variant_label("table5", "no_nsp") == "No NSP"
    assert variant_label("table8", "mask100") == "100% [MASK]"
    assert variant_label("table5", "not-a-variant") == "not-a-variant"  # ours alone: its own key
    assert PAPER["table5"].rows[0][2] == (84.4, 88.4, 86.7, 92.7, 88.5)  # BERT-base, as printed


def test_short_labels_name_the_papers_rows():
    for table, labels in SHORT_LABELS.items():
        assert set(labels) == {key for key, _, _ in PAPER[table].rows}, table
    assert short_label("table5", "no_nsp") == "No NSP"  # no short label: the paper's
    for key, label, _ in PAPER["table8"].rows:  # "80% [MASK], 20% random" is 80/0/20 ([MASK] / same / random)
        share = {kind: int(pct) for pct, kind in re.findall(r"(\d+)% (\[MASK\]|same|random)", label)}
        assert short_label("table8", key) == "/".join(str(share.get(k, 0)) for k in ("[MASK]", "same", "random"))
