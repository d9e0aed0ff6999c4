"""BERT's successors suite (bertlab/ablations/successors.py) and its page (pages/9_Successors.py)."""

from __future__ import annotations

import pytest

from bertlab.ablations import successors as succ
from bertlab.storage.runfolder import append_metrics, update_status, write_run_config
from bertlab.training.pretrain_config import load_config_file
from tests.test_access import FIELD, TOKEN, shared  # noqa: F401 (shared: a fixture)
from tests.test_app import app_env, assert_clean, open_page  # noqa: F401 (app_env: a fixture)

PAGE = "pages/9_Successors.py"


def test_every_claim_has_a_source_and_a_variant_of_the_suite():
    keys = {v.key for v in succ.suite_variants()}
    assert len({c.key for c in succ.CLAIMS}) == len(succ.CLAIMS)
    for claim in succ.CLAIMS:
        assert claim.variant in keys, claim.key
        assert claim.citation and claim.source and claim.what, claim.key
        assert "arXiv:" in claim.citation
        assert claim.paper in succ.SHORT_CITATIONS
    by_key = {c.key: dict((label, v) for label, v, _ in c.numbers) for c in succ.CLAIMS}
    assert by_key["electra_small"] == {"ELECTRA-Small GLUE score": 79.9, "BERT-Small GLUE score": 75.1}
    assert list(by_key["albert_sop"].values()) == [78.9, 52.0]
    assert list(by_key["roberta_no_nsp"].values()) == [90.4, 84.7, 90.4, 84.0]
    assert list(by_key["albert_size"].values()) == [12, 108, 80.1, 82.3]
    assert len(succ.claim_rows()) == len(succ.CLAIMS)


def test_every_config_has_a_row_that_loads():
    variants = succ.suite_variants()
    stems = sorted(p.stem for p in succ.CONFIG_DIR.glob("*.yaml"))
    assert sorted(v.key for v in variants) == stems
    assert variants[0].key == succ.BASELINE and variants[0].changes == ()
    for v in variants:
        load_config_file(succ.REPO_ROOT / v.config_path)  # loads as `bertlab pretrain` reads it
        assert v.key in succ.IN_SHORT
        assert v.max_tokens == variants[0].max_tokens  # equal tokens
        assert v.is_baseline or v.changes, f"{v.key} changes nothing against the baseline"
    by_key = {v.key: v for v in variants}
    assert by_key["albert"].family == "ALBERT" and "sentence-order" in by_key["albert"].objective
    assert any("embedding_size" in c for c in by_key["albert"].changes)
    assert by_key["span"].family == "BERT" and len(by_key["span"].changes) == 1  # only the objective
    assert "train.batch_size: 32 → 64" in by_key["roberta"].changes


def test_commands_and_job_args():
    by_key = {v.key: v for v in succ.suite_variants()}
    cmd = succ.pretrain_command(by_key["albert"])
    assert cmd.startswith("bertlab pretrain --config configs/successors/albert.yaml --run-dir runs/succ-albert ")
    assert "vocab=checkpoints/bertlab-mini/vocab.txt" in cmd
    assert "vocab=" not in succ.pretrain_command(by_key["roberta"])  # the BPE trains its own
    assert succ.job_args(by_key["span"])[:2] == ("--config", "configs/successors/span.yaml")


def test_a_missing_baseline_says_how_to_fix(tmp_path):
    (tmp_path / "span.yaml").write_text("name: x\n")
    with pytest.raises(succ.InputError, match="bert.yaml"):
        succ.suite_variants(tmp_path)


def fake_run(runs, name: str = "succ-albert") -> None:
    """A run folder half-way through: two evaluations, the last at 40.0% after 8M tokens."""
    run_dir = runs / name
    run_dir.mkdir(parents=True)
    write_run_config(run_dir, {"name": name})
    for step, tokens, acc in ((500, 1_000_000, 0.1), (4000, 8_000_000, 0.4)):
        append_metrics(run_dir, {"split": "eval", "step": step, "tokens": tokens, "mlm_acc": acc, "sop_acc": 0.7})
    update_status(
        run_dir,
        state="finished",
        step=4000,
        progress=0.25,
        last_train={"step": 4000, "tokens": 8_100_000},
        last_eval={"mlm_acc": 0.4},
    )


def test_run_progress_reads_the_run_folder(tmp_path):
    by_key = {v.key: v for v in succ.suite_variants()}
    fake_run(tmp_path)
    assert succ.run_progress(tmp_path, by_key["bert"]) is None
    run = succ.run_progress(tmp_path, by_key["albert"])
    assert run is not None and run.mlm_accuracy == pytest.approx(0.4) and run.eval_tokens == 8_000_000
    assert run.curve == ((1_000_000, 0.1), (8_000_000, 0.4))
    assert run.task_accuracies == {"sop": 0.7}
    assert "25%" in run.summary() and "40.0%, sentence order 70.0% at 8.0M tokens" in run.summary()
    rows = {r["variant"]: r for r in succ.suite_rows(list(by_key.values()), tmp_path)}
    assert rows["bert"]["pretraining run"] == "not run yet"
    assert "40.0%" in rows["albert"]["pretraining run"]


def test_page_shows_claims_suite_and_a_run(app_env, tmp_path):  # noqa: F811
    fake_run(tmp_path / "runs")
    at = open_page(PAGE)
    assert_clean(at)
    text = " ".join(str(m.value) for m in at.markdown) + " ".join(str(s.value) for s in at.subheader)
    assert (
        "In short" in text
        and "The papers' claims" in text
        and "The suite in your runs folder (32M each, mini size)" in text
    )
    tables = [t.value for t in at.table]
    claims = tables[0]
    ours = next(t for t in tables if "pretraining run" in t.columns)
    assert len(claims) == len(succ.CLAIMS) and "79.9" in " ".join(claims["numbers"])
    runs = dict(zip(ours["variant"], ours["pretraining run"], strict=True))
    assert "40.0%, sentence order 70.0% at 8.0M tokens" in runs["albert"] and runs["electra"] == "not run yet"
    subheaders = [str(s.value) for s in at.subheader]
    assert "Our verdicts" in subheaders and "Fine-tuning: each row on five tasks" in subheaders
    verdicts = next(t for t in tables if "verdict" in t.columns)  # one per claim, from the committed results
    assert list(verdicts["verdict"]).count("not measured yet") <= len(succ.CLAIMS) == len(verdicts)
    assert "claims, " in " ".join(str(m.value) for m in at.markdown)  # the count of verdicts in the In short
    assert "bertlab pretrain --config configs/successors/electra.yaml" in at.code[0].value
    assert at.selectbox(key="succ_pick").value is None  # no estimate until a variant is picked


def test_page_estimates_and_queues_a_variant(app_env, monkeypatch):  # noqa: F811
    from types import SimpleNamespace

    from bertlab.jobs.registry import JobRegistry

    if not (succ.REPO_ROOT.parent / "shared" / "data" / "corpus" / "gutenberg").is_dir():
        pytest.skip("the suite's corpus (../shared/data/corpus) is not here")
    queued = []

    def submit(self, spec, cwd=None, start=True):
        queued.append(spec)
        return SimpleNamespace(id="succ-span-1", state="queued", run_dir=self.root / "succ-span-1")

    monkeypatch.setattr(JobRegistry, "submit", submit)  # the spec, not a real hour-long run
    at = open_page(PAGE)
    at.selectbox(key="succ_pick").set_value("span").run(timeout=180)
    assert_clean(at)
    assert [m.label for m in at.metric] == ["Parameters", "Memory", "Time"]
    at.button(key="succ_launch").click().run(timeout=180)
    assert_clean(at)
    (spec,) = queued
    assert spec.kind == "pretrain" and spec.args[:2] == ("--config", "configs/successors/span.yaml")
    assert "succ-span-1" in " ".join(str(s.value) for s in at.success)


def test_shared_page_without_the_token_shows_commands_but_queues_nothing(shared):  # noqa: F811
    at = open_page(PAGE)
    assert_clean(at)
    assert "bertlab pretrain --config configs/successors/bert.yaml" in at.code[0].value
    assert not [s for s in at.selectbox if s.key == "succ_pick"]
    assert "needs the admin token" in " ".join(str(c.value) for c in at.caption)
    at.text_input(key=FIELD).input(TOKEN).run()
    assert at.selectbox(key="succ_pick").value is None  # with the token: pick one to queue it


def test_a_queued_run_of_the_variant_is_found_and_a_lookalike_is_not(tmp_path):
    by_key = {v.key: v for v in succ.suite_variants()}
    fake_run(tmp_path, "succ-bert-lr1.5e-3")  # another run: its name only starts alike
    assert succ.run_progress(tmp_path, by_key["bert"]) is None
    fake_run(tmp_path, "succ-bert-20261205-094700")  # as JobRegistry.submit names the suite's job
    run = succ.run_progress(tmp_path, by_key["bert"])
    assert run is not None and run.run_dir.name == "succ-bert-20261205-094700"


# --------------------------------------------------------------------------------------
# Fine-tuning the suite's rows: the ablation machinery's "successors" table
# --------------------------------------------------------------------------------------
def test_finished_rows_fine_tune_through_the_ablation_suites(tmp_path):
    from dataclasses import replace

    from bertlab.ablations import planning
    from bertlab.ablations.cli import add_args, spec_from_args

    variants = succ.suite_variants()
    fake_run(tmp_path, "succ-bert")
    (tmp_path / "succ-bert" / "model").mkdir()
    (tmp_path / "succ-bert" / "model" / "config.json").write_text("{}")
    fake_run(tmp_path, "succ-albert")  # finished, but its model folder is gone: not a row to fine-tune
    spec = succ.finetune_spec(variants, tmp_path)
    assert spec.row_models == (("bert", str(tmp_path / "succ-bert" / "model")),)
    assert spec.task_list == ("sst2", "mrpc", "qnli", "rte", "squad") and spec.seeds == 3 and spec.threads == 1
    runs = planning.plan(replace(spec, row_models=(("bert", "B"), ("electra", "E"))), "x")
    assert all(r.column != "pretraining" and r.needs is None for r in runs)  # the rows are pretrained apart
    assert {r.variant for r in runs} == {"bert", "electra"} and len(runs) == 2 * 5 * 3
    args = {(r.variant, r.column, r.seed): r.spec.args for r in runs}
    rte = args[("electra", "rte", 2)]
    assert rte[rte.index("--model") + 1] == "E" and rte[rte.index("--epochs") + 1] == "4.0"  # Table 5's RTE recipe
    # the command line says the same suite
    line = succ.finetune_command(variants, tmp_path)
    assert line.startswith("bertlab ablate run successors ") and f"--row-model bert={tmp_path}" in line
    import argparse

    parser = argparse.ArgumentParser()
    add_args(parser)
    parsed = parser.parse_args(line.split()[2:])
    assert spec_from_args(parsed) == spec
    assert succ.finetune_command(variants, tmp_path / "none") is None


def test_row_models_name_rows_of_the_successors_table():
    from bertlab.ablations import planning

    with pytest.raises(succ.InputError, match="successors"):
        planning.SuiteSpec("table5", row_models=(("mlm_nsp", "m"),))
    with pytest.raises(succ.InputError, match="no row 'gpt'"):
        planning.SuiteSpec("successors", row_models=(("gpt", "m"),))
    with pytest.raises(succ.InputError, match="one model"):
        planning.SuiteSpec("successors", row_models=(("bert", "a"), ("bert", "b")))


def test_a_successors_suite_launches_each_rows_fine_tuning(tmp_path, monkeypatch, tiny_checkpoint, tiny_electra_pair):
    from bertlab.ablations import planning
    from bertlab.ablations import suites as ab
    from bertlab.jobs.registry import JobRegistry

    for folder in ("glue/SST-2", "glue/RTE"):
        (tmp_path / "data" / folder).mkdir(parents=True)
    monkeypatch.setattr(JobRegistry, "_launch", lambda self, job, gpus: None)  # queue, run nothing
    registry = JobRegistry(tmp_path / "runs", cpu_slots=1, gpus=0)
    spec = planning.SuiteSpec("successors", tasks=("sst2", "rte"), seeds=1, data=str(tmp_path / "data"))
    with pytest.raises(succ.InputError, match="--row-model"):
        ab.launch(spec, registry, estimate=False)
    rows = (("bert", str(tiny_checkpoint)), ("electra", str(tiny_electra_pair)))
    record = ab.read_suite(ab.launch(planning.SuiteSpec(**{**spec.to_dict(), "row_models": rows}), registry, False))
    assert sorted((r["variant"], r["column"]) for r in record["runs"]) == [
        ("bert", "rte"),
        ("bert", "sst2"),
        ("electra", "rte"),
        ("electra", "sst2"),
    ]
    assert record["spec"]["row_models"] == [list(r) for r in rows]
