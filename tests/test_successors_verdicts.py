"""The successors suite's comparison table and its verdict per paper claim (bertlab.ablations.successors_verdicts)."""

from __future__ import annotations

import pytest

from bertlab.ablations import successors_verdicts as sv

TASKS = {"sst2": "accuracy", "mrpc": "accuracy", "qnli": "accuracy", "rte": "accuracy", "squad": "f1"}


def rows_of(scores: dict[str, dict[str, list[float]]]) -> list[dict]:
    """Tidy rows: {variant: {task: [value per seed]}} (MRPC also gets an F1 row, which the table ignores)."""
    out = []
    for variant, tasks in scores.items():
        for task, values in tasks.items():
            for seed, value in enumerate(values):
                row = {"table": "successors", "variant": variant, "task": task, "seed": seed, "run": "r"}
                out.append({**row, "metric": TASKS[task], "value": value})
                if task == "mrpc":
                    out.append({**row, "metric": "f1", "value": 81.2})
    return out


def flat(value: float, spread: float = 0.5) -> list[float]:
    return [value - spread, value, value + spread]


def everywhere(value: float, squad: float | None = None) -> dict[str, list[float]]:
    return {t: flat(squad if t == "squad" and squad is not None else value) for t in TASKS}


def verdict(vs: list[sv.ClaimVerdict], key: str) -> sv.ClaimVerdict:
    return next(v for v in vs if v.claim.key == key)


def test_scores_are_per_task_metric_and_averages_per_seed():
    rows = rows_of({"bert": {"sst2": [70.0, 74.0], "rte": [50.0, 60.0]}})
    scores = sv.task_scores(rows)
    assert scores[("bert", "sst2")].mean == pytest.approx(72.0)
    assert scores[("bert", "sst2")].n == 2
    # the average is taken per seed first: seed 0 (70+50)/2=60, seed 1 (74+60)/2=67
    avg = sv.average_scores(rows, ("sst2", "rte"))["bert"]
    assert avg.mean == pytest.approx(63.5)
    assert avg.std == pytest.approx(4.95, abs=0.01)
    # a row that misses a task has no average over it
    assert "bert" not in sv.average_scores(rows, ("sst2", "squad"))
    # MRPC is read on accuracy, not its F1 rows
    mrpc = sv.task_scores(rows_of({"bert": {"mrpc": [68.0]}}))[("bert", "mrpc")]
    assert mrpc.mean == 68.0


def test_finetune_rows_show_differences_from_bert_in_suite_order():
    rows = rows_of({"span": everywhere(70.0), "bert": everywhere(72.0)})
    table = sv.finetune_rows(rows)
    assert [r["row"] for r in table] == ["BERT (MLM + NSP)", "SpanBERT's masking"]
    assert table[0]["SST-2 (acc.)"] == "72.0 ± 0.5"
    assert table[1]["SST-2 (acc.)"] == "70.0 ± 0.5 (−2.0)"
    assert table[1]["5-task average"].startswith("70.0")
    one = sv.finetune_rows(rows_of({"bert": {"sst2": [77.0]}}))
    assert one[0]["SST-2 (acc.)"] == "77.0 (one seed)"
    assert one[0]["RTE (acc.)"] == "—"


def test_electra_verdict_follows_the_glue_average_and_its_noise():
    better = sv.claim_verdicts(rows_of({"bert": everywhere(70.0), "electra": everywhere(75.0)}))
    assert verdict(better, "electra_small").verdict == sv.AGREES
    level = sv.claim_verdicts(rows_of({"bert": everywhere(70.0), "electra": everywhere(70.3)}))
    assert verdict(level, "electra_small").verdict == sv.NO_CLEAR
    worse = sv.claim_verdicts(rows_of({"bert": everywhere(70.0), "electra": everywhere(65.0)}))
    assert verdict(worse, "electra_small").verdict == sv.DISAGREES
    missing = sv.claim_verdicts(rows_of({"bert": everywhere(70.0)}))
    v = verdict(missing, "electra_small")
    assert v.verdict == sv.NOT_YET and "ELECTRA" in v.why


def test_albert_size_needs_parameters_and_reads_a_loss_or_no_clear_one_as_agreement():
    rows = rows_of({"bert": everywhere(70.0), "albert": everywhere(68.0)})
    assert verdict(sv.claim_verdicts(rows), "albert_size").verdict == sv.NOT_YET  # no parameter counts
    params = {"bert": 5_450_000, "albert": 1_200_000}
    v = verdict(sv.claim_verdicts(rows, parameters=params), "albert_size")
    assert v.verdict == sv.AGREES and "4.5x fewer" in v.ours
    better = rows_of({"bert": everywhere(70.0), "albert": everywhere(74.0)})
    assert verdict(sv.claim_verdicts(better, parameters=params), "albert_size").verdict == sv.DISAGREES
    bigger = {"bert": 5_450_000, "albert": 6_000_000}
    assert verdict(sv.claim_verdicts(rows, parameters=bigger), "albert_size").verdict == sv.DISAGREES


@pytest.mark.parametrize(
    ("sop_on_nsp", "nsp_on_sop", "expected"),
    [
        (78.0, 51.0, sv.AGREES),  # the paper's pattern
        (50.5, 49.8, sv.NO_CLEAR),  # neither transfers
        (78.0, 70.0, sv.DISAGREES),  # NSP solves sentence order
    ],
)
def test_albert_sop_reads_both_ways_against_chance(sop_on_nsp, nsp_on_sop, expected):
    pair = {("albert", "nsp"): (sop_on_nsp, 1000), ("bert", "sop"): (nsp_on_sop, 1000)}
    assert verdict(sv.claim_verdicts([], pair_accuracy=pair), "albert_sop").verdict == expected
    assert verdict(sv.claim_verdicts([]), "albert_sop").verdict == sv.NOT_YET


def test_near_chance_uses_the_binomial_error_of_the_set_size():
    assert sv.near_chance(54.0, 1000)  # 99%: 2.58 SE = 4.1 points
    assert not sv.near_chance(55.0, 1000)
    assert not sv.near_chance(52.0, 100_000)


def test_roberta_and_span_verdicts():
    base = everywhere(70.0, squad=20.0)
    same = sv.claim_verdicts(rows_of({"bert": base, "roberta": everywhere(70.2, squad=20.1)}))
    assert verdict(same, "roberta_no_nsp").verdict == sv.NO_CLEAR
    worse = sv.claim_verdicts(rows_of({"bert": base, "roberta": everywhere(70.0, squad=15.0)}))
    assert verdict(worse, "roberta_no_nsp").verdict == sv.DISAGREES
    span_up = sv.claim_verdicts(rows_of({"bert": base, "span": everywhere(70.0, squad=24.0)}))
    assert verdict(span_up, "span_squad").verdict == sv.AGREES
    # SQuAD gains, but the classification tasks gain more: not the paper's "largest gains on span tasks"
    span_all = sv.claim_verdicts(rows_of({"bert": base, "span": everywhere(76.0, squad=22.0)}))
    assert verdict(span_all, "span_squad").verdict == sv.NO_CLEAR
    span_down = sv.claim_verdicts(rows_of({"bert": base, "span": everywhere(70.0, squad=15.0)}))
    assert verdict(span_down, "span_squad").verdict == sv.DISAGREES


def test_in_short_counts_the_verdicts():
    vs = sv.claim_verdicts(rows_of({"bert": everywhere(70.0), "electra": everywhere(75.0)}))
    text = sv.in_short(vs)
    assert text.startswith("Of the papers' 5 claims, 1 agrees")
    assert "4 are not measured yet" in text


def test_the_pretraining_record_feeds_the_albert_verdicts_and_the_cost_table():
    from bertlab.ablations.successors_record import PretrainingRow, SuccessorsRecord

    def row(variant, **kw):
        base = dict(run=f"succ-{variant}", family="BERT", objective="mlm_nsp", steps=10, tokens=32_000_000)
        base.update(train_s=3900.0, parameters=5_500_000, generator_parameters=None, size_mb=22.1)
        base.update(discriminator_size_mb=None, generator_size_mb=None, mlm_acc=0.29, task_metric="nsp_acc")
        base.update(task_acc=0.85, pair_head="nsp")
        return PretrainingRow(variant=variant, **{**base, **kw})

    record = SuccessorsRecord(
        (
            row("bert", nsp_acc=0.844, nsp_instances=739, sop_acc=0.542, sop_instances=578),
            row(
                "albert", parameters=1_400_000, task_metric="sop_acc", pair_head="sop", nsp_acc=0.70, nsp_instances=739
            ),
            row("electra", parameters=5_450_000, generator_parameters=2_470_000, task_metric="rtd_acc", pair_head=""),
        ),
        (),
    )
    parameters, pair = sv.record_inputs(record)
    assert parameters["albert"] == 1_400_000
    assert pair[("bert", "sop")] == (pytest.approx(54.2), 578) and ("albert", "sop") not in pair
    v = verdict(sv.claim_verdicts([], parameters, pair), "albert_sop")
    assert v.verdict == sv.AGREES  # 54.2% on 578 pairs: within 99% of chance (±5.4); 70% on 739 is not
    table = sv.pretraining_rows(record)
    assert [r["row"] for r in table] == ["BERT (MLM + NSP)", "ALBERT", "ELECTRA"]  # the suite's order
    assert table[0]["pair head on sentence order"] == "54.2%" and table[0]["its own task"] == "NSP 85.0%"
    assert table[2]["parameters"] == "5.45M (+ generator 2.47M)" and table[2]["fill-mask latency (p50)"] == "—"


def test_a_discriminator_that_did_not_learn_is_named_in_electras_verdict():
    rows = rows_of({"bert": everywhere(70.0), "electra": everywhere(65.0)})
    failed = verdict(sv.claim_verdicts(rows, discriminator_auc=0.49), "electra_small")
    assert failed.verdict == sv.UNTESTED and "did not learn (held-out AUC 0.49" in failed.why
    assert "As measured: ELECTRA's row is clearly below BERT's" in failed.why  # what it measured stays said
    assert "1 is not tested because its run failed" in sv.in_short(sv.claim_verdicts(rows, discriminator_auc=0.49))
    learned = verdict(sv.claim_verdicts(rows, discriminator_auc=0.8), "electra_small")
    assert learned.verdict == sv.DISAGREES and "did not learn" not in learned.why
    # not measured yet stays so, with the failed run named
    waiting = verdict(sv.claim_verdicts(rows_of({"bert": everywhere(70.0)}), discriminator_auc=0.49), "electra_small")
    assert waiting.verdict == sv.NOT_YET and "did not learn" in waiting.why
    others = [v for v in sv.claim_verdicts(rows, discriminator_auc=0.49) if v.claim.variant != "electra"]
    assert not any("did not learn" in v.why for v in others)


def test_one_seed_of_either_row_is_no_verdict_yet():
    """One seed's std is 0 because it is unmeasured: a 2-point gap on one seed is not 'clear'."""
    one = {"bert": {t: [70.0] for t in TASKS}, "roberta": {t: [68.0] for t in TASKS}}
    v = verdict(sv.claim_verdicts(rows_of(one)), "roberta_no_nsp")
    assert v.verdict == sv.NOT_YET
    assert "one seed so far of BERT (MLM + NSP) and RoBERTa's recipe" in v.why
    assert "(-2.0; one seed)" in v.ours
    # BERT's row with three seeds, the other with one: still no spread for the other row
    some = {"bert": everywhere(70.0), "albert": {t: [60.0] for t in TASKS}}
    v = verdict(sv.claim_verdicts(rows_of(some), parameters={"bert": 5_450_000, "albert": 1_200_000}), "albert_size")
    assert v.verdict == sv.NOT_YET and v.why.startswith("one seed so far of ALBERT:")
    # two seeds of each: measured
    two = {
        "bert": {t: [69.5, 70.5] for t in TASKS},
        "span": {t: [65.5, 66.5] if t == "squad" else [69.5, 70.5] for t in TASKS},
    }
    assert verdict(sv.claim_verdicts(rows_of(two)), "span_squad").verdict == sv.DISAGREES
