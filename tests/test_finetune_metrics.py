"""bertlab.finetune.metrics on cases small enough to check by hand (and against scipy when present)."""

import math

import pytest

from bertlab.errors import InputError
from bertlab.finetune import metrics as m


def test_accuracy_and_binary_f1():
    assert m.accuracy(["1", "0", "1", "1"], ["1", "1", "1", "0"]) == 0.5
    # tp = 1 (first), fp = 1 (second), fn = 1 (third): F1 = 2 / (2 + 1 + 1)
    assert m.f1_binary(["1", "1", "0", "0"], ["1", "0", "1", "0"]) == pytest.approx(0.5)
    assert m.f1_binary(["0", "0"], ["1", "0"]) == 0.0  # no true positive
    with pytest.raises(InputError, match="pair up"):
        m.accuracy(["1"], ["1", "0"])


def test_matthews_by_hand():
    # tp=2 fp=1 tn=1 fn=0: (2*1 - 1*0) / sqrt(3 * 2 * 2 * 1)
    assert m.matthews_corrcoef([1, 1, 1, 0], [1, 1, 0, 0]) == pytest.approx(2 / math.sqrt(12))
    assert m.matthews_corrcoef([1, 1, 0, 0], [1, 0, 1, 0]) == pytest.approx(0.0)
    assert m.matthews_corrcoef([1, 0, 1], [1, 0, 1]) == pytest.approx(1.0)
    assert m.matthews_corrcoef([1, 1, 1], [1, 0, 1]) == 0.0  # constant prediction: undefined -> 0


def test_pearson_and_spearman_with_ties():
    assert m.pearson([1, 2, 3], [2, 4, 6]) == pytest.approx(1.0)
    assert m.pearson([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    # ranks x = [1, 2.5, 2.5, 4], y = [1, 3, 2, 4]: sxy = 4.5, sxx = 4.5, syy = 5
    assert m.spearman([1, 2, 2, 3], [1, 3, 2, 4]) == pytest.approx(4.5 / math.sqrt(4.5 * 5))
    assert m.spearman([1, 2, 3, 4], [1, 8, 27, 64]) == pytest.approx(1.0)  # monotone, not linear


def test_correlations_match_scipy():
    stats = pytest.importorskip("scipy.stats")
    x = [0.1, 2.0, 2.0, 3.5, 1.0, 4.2, 0.1]
    y = [0.3, 1.0, 2.5, 3.0, 1.5, 5.0, 0.2]
    assert m.pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0])
    assert m.spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0])


def test_bio_entities_conlleval_semantics():
    assert m.bio_entities(["B-PER", "I-PER", "O", "I-LOC"]) == [("PER", 0, 1), ("LOC", 3, 3)]
    assert m.bio_entities(["B-PER", "I-LOC"]) == [("PER", 0, 0), ("LOC", 1, 1)]  # type change starts anew
    assert m.bio_entities(["B-PER", "B-PER", "I-PER"]) == [("PER", 0, 0), ("PER", 1, 2)]
    assert m.bio_entities(["O", "O"]) == []


def test_entity_f1_exact_span_match():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["O", "B-ORG"]]
    pred = [["B-PER", "O", "O", "B-LOC"], ["O", "B-ORG"]]
    # predicted {PER 0-0, LOC 3-3, ORG 1-1}; gold {PER 0-1, LOC 3-3, ORG 1-1}: 2 of 3 each way
    scores = m.entity_f1(pred, gold)
    assert scores["precision"] == pytest.approx(2 / 3)
    assert scores["recall"] == pytest.approx(2 / 3)
    assert scores["f1"] == pytest.approx(2 / 3)
    assert m.entity_f1([["O"]], [["O"]])["f1"] == 0.0
    # a wrong type on the right span is a miss
    assert m.entity_f1([["B-LOC"]], [["B-PER"]])["f1"] == 0.0


def test_token_accuracy():
    assert m.token_accuracy([["A", "B"], ["C"]], [["A", "X"], ["C"]]) == pytest.approx(2 / 3)
    with pytest.raises(InputError, match="sentence 0"):
        m.token_accuracy([["A"]], [["A", "B"]])


def test_squad_normalisation_and_scores():
    assert m.normalize_answer("The  Denver Broncos!") == "denver broncos"
    assert m.normalize_answer("an apple, a pear") == "apple pear"
    assert m.squad_exact_match("the Broncos", "Broncos") == 1.0
    # pred tokens [denver, broncos, team], gold [denver, broncos]: p = 2/3, r = 1
    assert m.squad_f1("Denver Broncos team", "Denver Broncos") == pytest.approx(0.8)
    assert m.squad_f1("Carolina", "Denver") == 0.0
    scores = m.squad_scores(
        ["Denver Broncos", "Panthers team"], [["Denver Broncos", "Broncos"], ["Carolina Panthers", "the Panthers"]]
    )
    # q1: EM 1, F1 1; q2: EM 0, F1 = max(0.5, 2/3) = 2/3
    assert scores["exact_match"] == pytest.approx(0.5)
    assert scores["f1"] == pytest.approx((1 + 2 / 3) / 2)
