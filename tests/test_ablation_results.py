"""bertlab/ablations/results.py, comparison.py and describe.py: tidy result files, the comparison with the
paper, and a result set in words."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from bertlab.ablations import comparison, describe, results
from bertlab.ablations.tables import MASK_MIXES
from bertlab.errors import InputError

REPO = Path(__file__).resolve().parent.parent


def _rows(table, values: dict[str, list[float]], task="sst2", metric="accuracy"):
    return [
        {"table": table, "variant": v, "task": task, "metric": metric, "value": x, "seed": s, "run": f"{v}{s}"}
        for v, xs in values.items()
        for s, x in enumerate(xs)
    ]


def test_verdicts_compare_directions_with_the_paper():
    rows = _rows(
        "table5",
        {"mlm_nsp": [80, 81, 82], "no_nsp": [70, 71, 72], "ltr": [85, 86, 87], "ltr_bilstm": [80, 82, 81]},
        task="qnli",
    )
    by = {v.variant: v for v in comparison.verdicts("table5", rows)}
    assert by["mlm_nsp"].text == "baseline row" and by["mlm_nsp"].agrees is None
    assert by["no_nsp"].agrees is True and by["no_nsp"].paper_delta == pytest.approx(-3.5)
    assert by["ltr"].agrees is False  # ours better, the paper's worse
    assert by["ltr_bilstm"].agrees is False and "no clear difference" in by["ltr_bilstm"].text
    assert by["no_nsp"].ours == pytest.approx(71) and by["no_nsp"].ours_std == pytest.approx(1)


def test_upos_stands_in_for_tables_8_ner_column_on_its_own_metric():
    """A Table 8 suite run on UPOS (token tagging, like NER) is read against the paper's NER columns,
    compared on its own accuracy (the paper's column is F1, which UPOS does not report)."""
    rows = _rows("table8", {"mask80_same10_rnd10": [60, 61, 62], "mask100": [40, 41, 42]}, task="upos")
    rows += _rows("table8", {"mask80_same10_rnd10": [66, 66, 66], "mask100": [45, 45, 45]}, task="upos-feature")
    by = {(v.variant, v.task): v for v in comparison.verdicts("table8", rows)}
    assert comparison.main_metric("table8", "upos") == "accuracy" and comparison.main_metric("table8", "ner") == "f1"
    assert by["mask100", "upos"].paper == pytest.approx(94.9) and by["mask100", "upos"].agrees is True
    assert by["mask100", "upos-feature"].paper_delta == pytest.approx(-0.9)
    assert by["mask100", "upos-feature"].ours_delta == pytest.approx(-21)
    # and so is a Table 7 suite on UPOS (the page's note says so for both tables)
    rows = _rows("table7", {"finetune": [80, 80, 80], "embeddings": [55, 56, 57]}, task="upos")
    embeddings = next(v for v in comparison.verdicts("table7", rows) if v.variant == "embeddings")
    assert embeddings.metric == "accuracy" and embeddings.paper_delta == pytest.approx(-5.4) and embeddings.agrees


def test_results_file_round_trip_and_bad_files(tmp_path):
    rows = _rows("table8", {"mask80_same10_rnd10": [50.0], "mask100": [49.5]}, task="upos")
    path = tmp_path / "table8.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=results.CSV_COLUMNS)
        w.writeheader()
        w.writerows(rows)
    assert results.read_results(path)[1]["value"] == 49.5
    assert results.results_files(tmp_path) == {"table8": path}
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match="not an ablation results file"):
        results.read_results(tmp_path / "bad.csv")
    (tmp_path / "bad2.csv").write_text(",".join(results.CSV_COLUMNS) + "\ntable8,x,upos,accuracy,high,0,r\n")
    with pytest.raises(InputError, match="numbers"):
        results.read_results(tmp_path / "bad2.csv")


def test_committed_results_are_tidy_and_cover_tables_5_and_8():
    root = REPO / "results" / "ablations"
    files = results.results_files(root)
    assert {"table5", "table8"} <= set(files)
    for table, path in files.items():
        rows = results.read_results(path)
        assert rows and {r["table"] for r in rows} == {table}
        meta = json.loads((root / f"{table}.json").read_text())
        assert meta["commit"] and meta["hardware"] and meta["spec"]["seeds"] >= 3
        seeds = {r["seed"] for r in rows if r["task"] != "pretraining"}
        assert len(seeds) >= 3
        assert comparison.verdicts(table, rows)


def test_the_page_says_where_we_agree_and_marks_what_does_not_compare():
    from bertlab.ablations.view import agreement_text, comparison_by_task

    rows = _rows("table5", {"mlm_nsp": [80, 81, 82], "no_nsp": [70, 71, 72], "ltr": [85, 86, 87]}, task="qnli")
    rows += _rows("table5", {"mlm_nsp": [14.0], "ltr": [16.0]}, task="pretraining", metric="mlm_acc")
    text = agreement_text("table5", rows)
    assert text.startswith("Same direction as the paper: No NSP on qnli.")
    assert "Against the paper's direction (a clear difference the other way): LTR & No NSP on qnli." in text
    # MRPC: the paper's No NSP is -0.2 (no difference in its one run); ours a clear -10, same sign
    mrpc = _rows("table5", {"mlm_nsp": [80, 81, 82], "no_nsp": [70, 71, 72], "ltr": [81, 81, 81]}, task="mrpc")
    text = agreement_text("table5", rows + mrpc)
    assert "the other way): LTR & No NSP on qnli. " in text
    # level where the paper's is -9.2: a miss, but not the paper's opposite
    assert "too small to tell here: LTR & No NSP on mrpc, where the paper's difference is clear" in text
    assert "of another kind: No NSP on mrpc, where we find a clear difference" in text
    assert text.endswith("cannot tell from none; it has the paper's sign.")
    table = {r["variant"]: r for r in comparison_by_task("table5", rows) if r["task"] == "pretraining (mlm_acc)"}
    assert table["LTR & No NSP"]["ours"] == "16.0 (next-token)"
    assert "No NSP" not in table  # no pretraining row for it: no row, not a None


def test_size_trend_is_a_rank_correlation():
    rows = _rows("table6", {"L2-H128-A2": [50], "L4-H128-A2": [55], "L4-H256-A4": [60]})
    assert comparison.size_trend(rows) == {"sst2 (accuracy)": 1.0}


def test_a_result_set_says_the_budget_it_ran_on():
    spec = {"table": "table8", "size": "tiny", "budget_s": 300.0, "seeds": 3, "epochs": 2.0}
    assert "pretrained for 5 min each" in describe.describe_spec(spec)
    assert "on up to 2000 train examples" in describe.describe_spec({**spec, "max_train_examples": 2000})
    whole = describe.describe_spec({**spec, "max_train_examples": 0, "max_eval_examples": 0})
    assert "on all the train examples" in whole and "scored on all the dev examples" in whole
    changed = describe.describe_spec(spec, ["train.learning_rate=1e-3"])  # the suite record's recipe_changes
    assert "with the shipped model's recipe (changed: train.learning_rate=1e-3)" in changed
    # `--set train.max_time_s=0 --set train.max_tokens=4000000` replaced the wall-clock budget
    tokens = {**spec, "overrides": ["train.max_time_s=0", "train.max_tokens=4000000"]}
    assert "pretrained on 4M tokens each" in describe.describe_spec(tokens)
    both = {**spec, "overrides": ["train.max_steps=100"]}
    assert describe.pretraining_budget(both) == "for 5 min or for 100 steps (whichever came first)"
    committed = json.loads((REPO / "results" / "ablations" / "table8.json").read_text())["spec"]
    assert "on 72M tokens" in describe.describe_spec(committed)
    # Table 7 probes one model: named with how far it had trained, which stays true when the shipped one trains on.
    # The main set (stage 4, one suite on a GPU, both columns), each column re-run by plain runs on the CPU
    # (UPOS on every training sentence, NER at fine-tuning's rate chosen again), adopted as suites and merged
    # in: said with the re-runs' recipes only, since the suite that made the set makes no column now
    t7 = json.loads((REPO / "results" / "ablations" / "table7.json").read_text())
    assert [m["columns"] for m in t7["merged"]] == [["upos"], ["ner"]]
    assert [r["columns"] for r in t7["replaced"]] == [["upos"], ["ner"]]
    said = describe.describe_spec(t7["spec"], t7.get("recipe_changes") or (), t7["merged"], t7["models"])
    assert said == (
        f"Model bertlab-mini after 172.7M tokens of pretraining; upos re-run later (suite {t7['merged'][0]['id']}, "
        "runs started by hand and adopted): fine-tuned on all the train examples (frozen features: 6.0 epochs at "
        "0.01); for upos 6 epochs at 0.001, 3 seeds each, scored on all the dev examples; ner re-run later (suite "
        f"{t7['merged'][1]['id']}, runs started by hand and adopted): fine-tuned on up to 4000 train examples "
        "(frozen features: 6.0 epochs at 0.01); for ner 6 epochs at 0.0005, 3 seeds each, scored on all the dev "
        "examples."
    )
    # the stage-3 set, kept whole: each column re-run and merged in, said with the re-run that makes it
    t7 = json.loads((REPO / "results" / "ablations" / "table7-stage3.json").read_text())
    said = describe.describe_spec(t7["spec"], (), t7["merged"], t7["models"])
    assert said.startswith(
        "Model bertlab-mini after 85.4M tokens of pretraining; upos re-run later (suite t7s3uposf1e2"
    )
    assert "ner re-run later (suite t7s3nerf1e2" in said and said.count("(frozen features: 6.0 epochs at 0.01)") == 2
    replaced = ("t7s3upos1e3", "t7s3uposf3e3", "t7s3ner-", "t7s3nerf3e3")  # re-runs a later one replaced make nothing
    assert not [r for r in replaced if r in said]
    assert "learning rate 0.0001" not in said  # its own suite's recipe made none of the columns it has now
    # a task's own fine-tuning recipe is said, for the tasks the set ran
    own = {**spec, "finetune_lr": 1e-4, "tasks": ["upos"], "task_recipes": [["upos", 4.0, 3e-4], ["ner", 3.0, 2e-4]]}
    said = describe.describe_spec(own)
    assert "train examples (frozen features: 2.0 epochs at 0.001); for upos 4 epochs at 0.0003, 3 seeds" in said
    both = describe.describe_spec({**own, "tasks": ["upos", "ner2"]})  # a task on the suite's own recipe
    assert "for 2.0 epochs at learning rate 0.0001 (frozen features: 2.0 epochs at 0.001); for upos 4 epochs" in both
    assert "for ner" not in said
    # a task's own taggers' rate is said beside the others' (a frozen-feature column counts as its task)
    rates = {**own, "feature_lr": 3e-3, "task_feature_lrs": [["upos", 1e-2]]}
    assert "(frozen features: 2.0 epochs at 0.01 for upos, else 0.003)" in describe.describe_spec(
        {**rates, "tasks": ["upos", "ner"]}
    )
    assert "(frozen features: 2.0 epochs at 0.01 for upos);" in describe.describe_spec(rates)


def test_committed_results_say_where_they_agree_and_why(tmp_path):
    for table in ("table5", "table8"):
        note = results.results_note(REPO / "results" / "ablations" / f"{table}.csv")
        assert "Where we agree" in note and "Where we do not" in note and "Why" in note, table
    assert results.results_note(tmp_path / "table5.csv") == ""


@pytest.mark.parametrize("table", ["table5", "table6", "table7", "table8"])
def test_committed_readings_open_with_a_short_paragraph_that_gives_the_count(table):
    """What the page shows first of a committed reading is one short paragraph (its "In short"), which
    quotes the direction count the page computes; the findings and the method follow, every other paragraph
    once, in its order."""
    from bertlab.ablations.view import agreement

    csv_path = REPO / "results" / "ablations" / f"{table}.csv"
    note = results.results_note(csv_path)
    reading = describe.split_reading(note)
    assert reading.short.startswith("**In short:**") and len(reading.short.split()) <= 130, table
    agree = agreement(table, results.read_results(csv_path))
    assert f"{agree['reproduced']} of the {agree['compared']} comparisons" in " ".join(reading.short.split()), table
    assert reading.findings.startswith("**Where we agree") and "**Where we do not" in reading.findings
    assert "**Why:**" in reading.findings and "**Why:**" not in reading.method
    parts = [p for part in (reading.short, reading.findings, reading.method) for p in part.split("\n\n") if p]
    assert sorted(parts) == sorted(p.strip() for p in note.split("\n\n") if p.strip())


def test_a_reading_without_a_short_paragraph_opens_with_its_first():
    reading = describe.split_reading("**In one line:** a.\n\n| t |\n|---|\n\n**Why:** b.\n\n**How:** c.")
    assert reading == describe.Reading("**In one line:** a.", "**Why:** b.", "| t |\n|---|\n\n**How:** c.")
    assert describe.split_reading("") == describe.Reading("", "", "")
    side = describe.split_reading("**In one line:** a.\n\n**Budget:** b.\n\n**What it shows:** c.\n\n**Why:** d.")
    assert side == describe.Reading("**In one line:** a.\n\n**What it shows:** c.", "**Why:** d.", "**Budget:** b.")


def _table_cells(line: str) -> list[str]:
    """A reading's markdown table line as its cells, bold marks dropped."""
    return [p.strip().replace("**", "") for p in line.strip("|").split("|")]


T7_ROWS = {
    "fine-tuning": "finetune",
    "embeddings": "embeddings",
    "second-to-last hidden": "second_to_last",
    "last hidden": "last",
    "weighted sum, last four": "wsum4",
    "concat last four": "cat4",
    "weighted sum, all layers": "mix",
}
T7_ROWS_METRICS = {("upos", "accuracy"), ("ner", "f1")}


def _t7_cells(name: str) -> dict[tuple[str, str], comparison.Cell]:
    rows = results.read_results(REPO / "results" / "ablations" / f"{name}.csv")
    return {(c.variant, c.task): c for c in comparison.summarize(rows) if (c.task, c.metric) in T7_ROWS_METRICS}


@pytest.mark.parametrize("name", ["table7", "table7-stage3", "table7-stage2"])
def test_table7_readings_quote_their_own_results(name):
    """Each Table 7 set's reading (the .md the page shows) quotes its own CSV: every cell of its table (mean ±
    std over seeds, the difference from fine-tuning) and its count of directions reproduced."""
    from bertlab.ablations.view import agreement

    csv_path = REPO / "results" / "ablations" / f"{name}.csv"
    note = results.results_note(csv_path)
    cells = _t7_cells(name)
    seen = set()
    for line in note.splitlines():
        parts = _table_cells(line)
        if parts[0] not in T7_ROWS:
            continue
        variant = T7_ROWS[parts[0]]
        for said, task in zip(parts[1:3], ("upos", "ner"), strict=True):
            c, base = cells[(variant, task)], cells[("finetune", task)]
            want = f"{c.mean:.1f} ± {c.std:.1f}"
            if variant != "finetune":
                want += f" ({c.mean - base.mean:+.1f})".replace("-", "−")
            assert said == want, (name, variant, task)
        seen.add(variant)
    assert seen == set(T7_ROWS.values()), name
    agree = agreement("table7", results.read_results(csv_path))
    assert f"{agree['reproduced']} of the {agree['compared']} comparisons go the paper's way" in " ".join(note.split())


def test_table7s_main_set_probes_the_shipped_model_and_says_what_moved_since_stage_3():
    """The page shows Table 7 'on the shipped model': the main set's record names the model the shipped
    checkpoint holds now (its card's total tokens), the stage-3 set the one before, and the main reading's
    comparison with stage 3 quotes both CSVs."""
    card = json.loads((REPO / "checkpoints" / "bertlab-mini" / "model_card.json").read_text())
    main = json.loads((REPO / "results" / "ablations" / "table7.json").read_text())
    stage3 = json.loads((REPO / "results" / "ablations" / "table7-stage3.json").read_text())
    assert {m["total_tokens"] for m in main["models"].values()} == {card["total_tokens"]}
    assert {m["total_tokens"] for m in stage3["models"].values()} == {card["init_card"]["total_tokens"]}
    assert main["spec"]["model"] == "" and main["spec"]["data"] == "../shared/data"
    assert "after stage 3 (85.4M tokens)" in stage3["label"] and "label" not in main
    note = " ".join(results.results_note(REPO / "results" / "ablations" / "table7.csv").split())
    now, before = _t7_cells("table7"), _t7_cells("table7-stage3")
    # NER against stage 3 (the same data) at the same rates: the GPU column that NER's rates chosen again
    # replaced (kept in the record), then that column against the one now; UPOS against the first 4,000
    # sentences on this model, the column that all 12,544 replaced, and stage 3's own 4,000
    (ner_then,) = [r["rows"] for r in main["replaced"] if r["columns"] == ["ner"]]
    then = {(c.variant, c.task): c for c in comparison.summarize(ner_then) if c.metric == "f1"}
    assert f"({before[('finetune', 'ner')].mean:.1f} → {then[('finetune', 'ner')].mean:.1f})" in note
    assert f"({then[('finetune', 'ner')].mean:.1f} → {now[('finetune', 'ner')].mean:.1f})" in note
    (capped,) = [r["rows"] for r in main["replaced"] if r["columns"] == ["upos"]]
    on_4000 = {c.variant: c for c in comparison.summarize(capped)}
    assert (
        f"({before[('finetune', 'upos')].mean:.1f} → {on_4000['finetune'].mean:.1f} → {now[('finetune', 'upos')].mean:.1f})"
        in note
    )
    gap = {
        k: cells[("embeddings", "ner")].mean - cells[("finetune", "ner")].mean
        for k, cells in (("now", then), ("before", before))
    }
    assert f"the embeddings {gap['before']:+.1f} → {gap['now']:+.1f}".replace("-", "−") in note


def test_table6_rows_go_from_the_smallest_shape_up_whatever_order_they_ran_in():
    """A suite may run its largest shape first (it takes longest); the table still starts at the smallest,
    the row the others are compared with, and shapes of equal size keep the order they ran in."""
    ran = _rows("table6", {"L2-H256-A4": [60], "L2-H128-A2": [50], "L2-H128-A4": [51], "L4-H128-A2": [55]})
    ordered = results.in_table_order("table6", ran)
    assert [r["variant"] for r in ordered] == ["L2-H128-A2", "L2-H128-A4", "L4-H128-A2", "L2-H256-A4"]
    table5 = _rows("table5", {"no_nsp": [70], "mlm_nsp": [80]})
    assert results.in_table_order("table5", table5) == table5  # rows the paper names keep their own order


def test_table6_judges_each_bigger_shape_against_our_smallest_by_the_papers_size_trend():
    """Table 6's rows are our own shapes: each is compared with our smallest, and a bigger one reproduces
    the paper's 'bigger is better' only when it is better beyond its noise; a shape of the same size
    (other heads) is shown but not judged."""
    rows = _rows(
        "table6", {"L2-H128-A2": [60, 62], "L2-H128-A4": [65, 65], "L4-H128-A2": [61, 61], "L2-H256-A4": [70, 71]}
    )
    rows += _rows("table6", {"L2-H128-A2": [300.0], "L2-H256-A4": [190.0]}, task="pretraining", metric="mlm_perplexity")
    by = {(v.variant, v.task): v for v in comparison.verdicts("table6", rows)}
    assert by["L2-H128-A2", "sst2"].text == "baseline row" and by["L2-H128-A2", "sst2"].agrees is None
    assert by["L2-H256-A4", "sst2"].agrees is True and by["L2-H256-A4", "sst2"].paper_delta == pytest.approx(5.3)
    assert by["L4-H128-A2", "sst2"].agrees is False and "no clear difference" in by["L4-H128-A2", "sst2"].text
    assert by["L2-H128-A4", "sst2"].agrees is None and "not judged" in by["L2-H128-A4", "sst2"].text
    wide = by["L2-H256-A4", "pretraining"]  # lower perplexity is better
    assert wide.agrees is True and wide.ours_delta == pytest.approx(-110) and wide.paper_delta == pytest.approx(-2.61)


def test_a_row_whose_pretraining_failed_is_named_with_why():
    rows = _rows("table8", {"mask80_same10_rnd10": [60], "mask100": [40]}, task="upos")
    runs = [
        {"variant": "mask80_same10_rnd10", "column": "pretraining", "state": "finished"},
        {"variant": "rnd100", "column": "pretraining", "state": "failed"},
        {"variant": "rnd100", "column": "upos", "state": "waiting"},
        {"variant": "mask80_rnd20", "column": "pretraining", "state": "running"},
        {"variant": "mask80_same20", "column": "pretraining", "state": "finished"},
        {"variant": "mask80_same20", "column": "upos", "state": "cancelled"},
    ]
    assert results.rows_without_results(rows, runs) == {
        "rnd100": "its pretraining run failed, so none of its fine-tuning runs ran",
        "mask80_rnd20": "its runs have not finished",
        "mask80_same20": "its runs failed, were stopped or were deleted",
    }
    committed = json.loads((REPO / "results" / "ablations" / "table8.json").read_text())
    shipped = results.read_results(REPO / "results" / "ablations" / "table8.csv")
    # 100% random diverged in bf16; its fp32 re-run (a later lease) filled the row
    assert results.rows_without_results(shipped, committed["runs"]) == {}
    assert {r["variant"] for r in shipped} == {k for k, _, _ in MASK_MIXES}


def test_the_plateau_warning_says_how_far_its_rows_got():
    near = comparison.plateau_text("table6", {"L2-H128-A2": 19.3})
    assert "#L=2 #H=128 #A=2: 19.3%" in near and "learned some context" in near and "little beyond" not in near
    stuck = comparison.plateau_text("table8", {"rnd100": 14.0, "mask100": 5.1})  # one row on the guess: say so
    assert "little beyond how common each word is" in stuck and "100% [MASK]: 5.1%" in stuck


def test_size_breaks_name_the_shapes_clearly_worse_than_a_smaller_one():
    rows = _rows(
        "table6", {"L2-H128-A2": [60, 61], "L2-H128-A4": [64, 65], "L4-H128-A2": [62, 63], "L2-H256-A4": [64, 64.6]}
    )
    rows += _rows(
        "table6",
        {"L2-H128-A2": [300.0], "L2-H128-A4": [250.0], "L4-H128-A2": [200.0]},
        task="pretraining",
        metric="mlm_perplexity",
    )
    breaks = comparison.size_breaks(rows)
    assert breaks["pretraining (mlm_perplexity)"] == []  # falls with size; shapes of one size are not compared
    (b,) = breaks["sst2 (accuracy)"]  # the 4-head 0.4M shape (64.5) beats both larger ones; only the clear loss counts
    assert (b.variant, b.smaller, b.smaller_value) == ("L4-H128-A2", "L2-H128-A4", 64.5)  # L2-H256-A4: within noise

    def top(name: str) -> set[str]:
        shipped = results.read_results(REPO / "results" / "ablations" / f"{name}.csv")
        return {b.variant for b in comparison.size_breaks(shipped)["pretraining (mlm_perplexity)"]}

    assert top("table6-40M") == {"L4-H512-A8", "L8-H512-A8"}  # both 512-wide shapes behind the 6M one at 40M tokens
    assert top("table6") == {"L8-H512-A8"}  # at 80M only the largest, behind the 12.6M one


def test_table6_reading_quotes_its_own_results():
    """Table 6's reading (the .md the page shows) quotes its own CSV: every cell of its table (perplexity,
    masked-token accuracy, SST-2 and MRPC mean ± std over seeds), its count of directions reproduced and the
    perplexity's rank correlation with size."""
    from bertlab.ablations.view import agreement

    csv_path = REPO / "results" / "ablations" / "table6.csv"
    rows = results.read_results(csv_path)
    cells = {(c.variant, c.task, c.metric): c for c in comparison.summarize(rows)}
    note = results.results_note(csv_path)
    seen = set()
    for line in note.splitlines():
        parts = _table_cells(line)
        if not parts[0].startswith("L="):
            continue
        layers, hidden, heads = (x.split("=")[1] for x in parts[0].split(" (")[0].split(", "))
        variant = f"L{layers}-H{hidden}-A{heads}"
        ppl, acc = (cells[(variant, "pretraining", m)] for m in ("mlm_perplexity", "mlm_acc"))
        assert parts[2:4] == [f"{ppl.mean:.1f}", f"{acc.mean:.1f}%"], variant
        for said, task in zip(parts[4:6], ("sst2", "mrpc"), strict=True):
            c = cells[(variant, task, "accuracy")]
            assert said == f"{c.mean:.1f} ± {c.std:.1f}", (variant, task)
        seen.add(variant)
    assert seen == {r["variant"] for r in rows} and len(seen) == 9
    text = " ".join(note.split())
    agree = agreement("table6", rows)
    assert f"{agree['reproduced']} of the {agree['compared']} comparisons with a bigger shape" in text
    rho = comparison.size_trend(rows)["pretraining (mlm_perplexity)"]
    assert f"rank correlation with size {rho:+.2f}".replace("-", "−") in text


def test_a_tiny_budget_is_named_in_thousands_not_as_zero_millions():
    from bertlab.ablations.describe import what_rows_are

    meta = {"spec": {"table": "table5"}, "models": {"mlm_nsp": {"size": "tiny", "tokens": 20_480}}}
    assert what_rows_are(meta)["mlm_nsp"] == "tiny, 20k tokens"
    meta["models"]["mlm_nsp"]["tokens"] = 72_000_000
    assert what_rows_are(meta)["mlm_nsp"] == "tiny, 72.0M tokens"


def test_a_verdict_on_one_run_a_row_says_so_instead_of_a_spread_of_zero():
    one = {
        v.variant: v.text
        for v in comparison.verdicts("table5", _rows("table5", {"mlm_nsp": [80.0], "no_nsp": [76.0]}, task="qnli"))
    }
    assert "ours -4.0 (one run each): worse" in one["no_nsp"] and "±" not in one["no_nsp"]
    seeds = {
        v.variant: v.text
        for v in comparison.verdicts("table5", _rows("table5", {"mlm_nsp": [80, 81], "no_nsp": [79, 79]}, task="qnli"))
    }
    assert "ours -1.5 ± 0.7" in seeds["no_nsp"]
