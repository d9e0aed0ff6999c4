"""bertlab/jobs/estimates/estimate.py and the modules it is made of (job_estimates, memory_estimate, step_time,
timed_step): parameters, memory and time of a run before it starts."""

from __future__ import annotations

import json
import math

import pytest
from conftest import REPO, tiny_spec

from bertlab.config import BertConfig, preset
from bertlab.jobs.estimates.estimate import compile_seconds, estimate
from bertlab.jobs.estimates.memory import count_parameters
from bertlab.jobs.estimates.spec import estimate_spec
from bertlab.jobs.spec import JobError, JobSpec


def test_parameter_count_matches_the_model():
    from bertlab.model import BertForPreTraining

    for cfg in (preset("tiny", vocab_size=500), preset("mini", vocab_size=300, use_nsp_head=False)):
        assert count_parameters(cfg) == BertForPreTraining(cfg).num_parameters()
    assert abs(count_parameters(preset("base")) - 110e6) < 1e6  # the paper's BERT-base: 110M


def test_estimate_is_sane(runs):
    base = preset("base")
    small = estimate(base, batch_size=32, seq_length=128, max_steps=1000, device="cpu")
    big = estimate(base, batch_size=64, seq_length=128, max_steps=1000, device="cpu")
    longer = estimate(base, batch_size=32, seq_length=128, max_steps=2000, device="cpu")
    assert small.parameters == count_parameters(base)
    assert small.weights_gb == pytest.approx(small.parameters * 4 / 2**30)
    assert small.optimizer_gb == pytest.approx(small.parameters * 12 / 2**30)  # grads + Adam m, v
    assert big.activations_gb > 1.9 * small.activations_gb - 0.1 and big.weights_gb == small.weights_gb
    assert longer.seconds == pytest.approx(2 * small.seconds)
    assert 1 < small.total_gb < 20  # BERT-base, batch 32 x 128: a few GB
    assert small.throughput_source.startswith("tabulated")
    gpu = estimate(base, batch_size=32, seq_length=128, max_steps=1000, device="cuda")
    assert gpu.seconds < small.seconds / 100  # a GPU is orders of magnitude faster
    assert gpu.activations_gb < small.activations_gb  # bf16 and fused attention
    two = estimate(base, batch_size=32, seq_length=128, max_steps=1000, device="cuda", num_gpus=2)
    assert two.tokens_per_step == 2 * gpu.tokens_per_step and two.total_gb == pytest.approx(gpu.total_gb)
    timed = estimate(base, batch_size=32, seq_length=128, max_time_s=600, device="cpu")
    assert timed.seconds == 600 and timed.steps == int(600 / (small.seconds / 1000))
    frozen = estimate(base, pretraining=False, trainable_fraction=0.01, device="cpu")
    assert frozen.optimizer_gb < small.optimizer_gb / 50
    with pytest.raises(JobError):
        estimate(base, device="tpu")


def test_estimate_uses_measured_throughput_of_an_earlier_run(runs):
    cfg = preset("tiny", vocab_size=1000)
    run = runs / "earlier"
    run.mkdir(parents=True)
    (run / "run_config.json").write_text(
        json.dumps(
            {
                "kind": "pretrain",
                "model_config": {"num_layers": 2, "hidden_size": 128, "num_heads": 2, "intermediate_size": 512},
                "config": {"data": {"max_seq_length": 128}},
            }
        )
    )
    (run / "status.json").write_text(json.dumps({"state": "finished", "device": "cpu"}))
    (run / "metrics.jsonl").write_text(
        "".join(json.dumps({"split": "train", "step": s, "seq_per_s": 10.0}) + "\n" for s in range(5))
    )
    est = estimate(cfg, batch_size=32, seq_length=128, max_steps=100, device="cpu", runs_dir=runs)
    assert est.throughput_source == "measured in run earlier" and est.tokens_per_s == 1280.0
    assert est.seconds == pytest.approx(100 * 32 / 10.0)  # 3.2 s a step at 10 sequences/s
    ltr = preset("tiny", vocab_size=1000, attention_direction="left_to_right")  # predicts every token: not the same job
    est = estimate(ltr, batch_size=32, seq_length=128, max_steps=100, device="cpu", runs_dir=runs)
    assert not est.throughput_source.startswith("measured in run")


def test_estimate_reads_finetuning_runs_too(runs):
    """A fine-tuning run_config has `data` as a path and max_seq_length at the top."""
    run = runs / "finetuned"
    run.mkdir(parents=True)
    (run / "run_config.json").write_text(
        json.dumps(
            {
                "kind": "finetune",
                "config": {"data": "/d", "max_seq_length": 64, "task": "sst2", "train": {"batch_size": 32}},
                "model_config": {"num_layers": 2, "hidden_size": 128, "num_heads": 2, "intermediate_size": 512},
            }
        )
    )
    (run / "status.json").write_text(json.dumps({"state": "finished", "device": "cpu"}))
    (run / "metrics.jsonl").write_text(
        "".join(json.dumps({"split": "train", "step": s, "seq_per_s": 20.0}) + "\n" for s in range(4))
    )
    kw = dict(batch_size=32, seq_length=64, max_steps=10, device="cpu", runs_dir=runs, pretraining=False)
    est = estimate(preset("tiny"), task="sst2", **kw)
    assert est.throughput_source == "measured in run finetuned" and est.seconds == pytest.approx(10 * 32 / 20.0)
    assert not estimate(preset("tiny"), task="cola", measure=False, **kw).throughput_source.startswith("measured")


def test_an_earlier_cpu_run_on_other_threads_is_not_the_same_job(runs, monkeypatch):
    """A step on 1 thread took ~1.4x one on 2 here: an earlier --threads 1 run's rate is not a 2-thread job's."""
    monkeypatch.setattr("bertlab.jobs.estimates.step_time.default_threads", lambda: 2)
    run = runs / "one-thread"
    run.mkdir(parents=True)
    train = {"batch_size": 32, "num_threads": 1}
    (run / "run_config.json").write_text(
        json.dumps(
            {
                "kind": "finetune",
                "config": {"data": "/d", "max_seq_length": 64, "task": "sst2", "train": train},
                "model_config": {"num_layers": 2, "hidden_size": 128, "num_heads": 2, "intermediate_size": 512},
            }
        )
    )
    (run / "status.json").write_text(json.dumps({"state": "finished", "device": "cpu"}))
    (run / "metrics.jsonl").write_text(
        "".join(json.dumps({"split": "train", "step": s, "seq_per_s": 20.0}) + "\n" for s in range(4))
    )
    kw = dict(batch_size=32, seq_length=64, max_steps=10, device="cpu", runs_dir=runs, pretraining=False, task="sst2")
    assert estimate(preset("tiny"), threads=1, **kw).throughput_source == "measured in run one-thread"
    for threads in (0, 2):  # 0: torch's default, one a core (2 here)
        assert not estimate(preset("tiny"), threads=threads, measure=False, **kw).throughput_source.startswith(
            "measured"
        )


def test_estimate_of_a_spec(runs, job_data):
    corpus, cache = job_data
    est = estimate_spec(tiny_spec(corpus, cache, steps=40), cwd=REPO, runs_dir=runs)
    # the rows' real tokens, not 8 full rows of 32: a document's last instance (and 10% of all) is short
    assert est.steps == 40 and 0.6 * 8 * 32 < est.tokens_per_step < 8 * 32 and est.device == "cpu"
    assert est.padded_tokens_per_step <= 8 * 32 and est.lengths_source.startswith(
        "pretraining instances made from all 30 of"
    )
    assert est.parameters == count_parameters(
        preset(
            "tiny",
            vocab_size=200,
            num_layers=1,
            hidden_size=32,
            num_heads=2,
            intermediate_size=64,
            max_position_embeddings=512,
        )
    )


def test_a_starting_model_whose_config_does_not_parse_is_an_error(runs, tmp_path):
    _write_sst2(tmp_path)
    model = tmp_path / "broken-model"
    model.mkdir()
    (model / "config.json").write_text("{not json")
    spec = JobSpec("finetune", ("--task", "sst2", "--data", str(tmp_path), "--model", str(model)), device="cpu")
    with pytest.raises(JobError, match="cannot be read as a model config"):
        estimate_spec(spec, cwd=REPO, runs_dir=runs)
    (model / "config.json").write_text(json.dumps({"hidden_size": 32}))  # not a BERT config: keys missing
    with pytest.raises(JobError, match="missing key"):
        estimate_spec(spec, cwd=REPO, runs_dir=runs)
    hub_id = JobSpec("finetune", ("--task", "sst2", "--data", str(tmp_path), "--model", "google/bert-x"), device="cpu")
    assert estimate_spec(hub_id, cwd=REPO, runs_dir=runs, measure=False).parameters == count_parameters(
        preset("mini"), False
    )
    not_cola = JobSpec("finetune", ("--task", "cola", "--data", str(tmp_path)), device="cpu")  # SST-2 files
    unread = estimate_spec(not_cola, cwd=REPO, runs_dir=runs, measure=False)  # the job will fail; the page says why
    assert "cannot be read to count its tokens" in unread.notes[0] and "expected 4" in unread.notes[0]
    assert unread.problem == unread.notes[0]  # the Train page refuses to launch it
    assert unread.lengths_source.startswith("typical lengths of cola")


def test_count_parameters_of_a_classifier_is_the_real_model():
    from bertlab.finetune.models import HeadConfig, build_task_model

    cfg = preset("tiny", vocab_size=300)
    assert (
        count_parameters(cfg, pretraining_heads=False, num_labels=3)
        == build_task_model(cfg, HeadConfig(shape="single", num_labels=3)).num_parameters()
    )


def test_a_finetuning_estimate_counts_the_task_layers_it_adds_and_trains(runs, tmp_path):
    """A BiLSTM's weights are in the parameters and the memory; a frozen encoder's are not trained."""
    from bertlab.finetune.models import HeadConfig, build_task_model
    from bertlab.jobs.spec import finetune_args

    data = _write_sst2(tmp_path / "sst2")

    def est(**kw):
        args = (*finetune_args("sst2", str(data), max_steps=2, size="tiny", **kw),)
        return estimate_spec(JobSpec("finetune", args, device="cpu"), cwd=REPO, runs_dir=runs, measure=False)

    def built(**kw):
        return build_task_model(preset("tiny", vocab_size=300), HeadConfig(shape="single", num_labels=2, **kw))

    plain, bilstm, frozen = est(), est(bilstm=True), est(mode="feature", features="cat4", bilstm=True)
    lstm = built(bilstm=True).num_parameters() - built().num_parameters()  # whatever the vocabulary
    assert lstm > 0 and bilstm.parameters == plain.parameters + lstm
    assert bilstm.weights_gb > plain.weights_gb and bilstm.optimizer_gb > plain.optimizer_gb
    model = built(mode="feature", features="cat4", bilstm=True)
    encoder = sum(p.numel() for p in model.bert.parameters())
    assert frozen.trainable_parameters == model.num_parameters(trainable_only=True) == model.num_parameters() - encoder


def _write_sst2(folder, n: int = 160):
    """An SST-2 folder of sentences 3 to 40 words long, so batches are padded to varied lengths."""
    import random

    rng = random.Random(0)
    words = "the a film movie was is good bad great dull story actor scene plot funny long slow sharp".split()
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows in (("train.tsv", n), ("dev.tsv", 16)):
        lines = ["sentence\tlabel"]
        lines += [f"{' '.join(rng.choice(words) for _ in range(rng.randint(3, 40)))}\t{i % 2}" for i in range(rows)]
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def test_a_finetuning_estimate_counts_the_real_tokens_of_the_task_and_the_shipped_model(runs, tmp_path):
    from bertlab.finetune.cli import config_from_args
    from bertlab.jobs.estimates.task_tokens import task_tokens
    from bertlab.jobs.spec import finetune_args, parse_recipe_args

    data = _write_sst2(tmp_path / "sst2")
    args = finetune_args("sst2", str(data), max_steps=10, batch_size=16)
    est = estimate_spec(JobSpec("finetune", args, device="cpu"), cwd=REPO, runs_dir=runs, measure=False)
    shipped = json.loads((REPO / "checkpoints/bertlab-mini/config.json").read_text())
    assert est.parameters == count_parameters(
        BertConfig.from_hf_dict(shipped, "shipped"), pretraining_heads=False
    )  # the model `finetune` runs without --model, not a preset with BERT's 30,522-token vocabulary
    tokens = task_tokens(config_from_args(parse_recipe_args("finetune", args)), 16)
    assert 5 < tokens.real_per_row < tokens.padded_per_row <= tokens.longest <= 128
    assert est.tokens_per_step == round(16 * tokens.real_per_row) < est.padded_tokens_per_step < 16 * 128
    assert "train examples of sst2" in est.lengths_source and est.compile_s == 0  # padded batches: no compile
    assert estimate_spec(JobSpec("finetune", (*args[:-2], "--epochs", "2"), device="cpu"), cwd=REPO, runs_dir=runs,
                         measure=False).steps == 2 * math.ceil(160 / 32)  # fmt: skip
    # an epoch budget over data that cannot be read: its steps and time are not known (it said 1 step, 0.2 s)
    (tmp_path / "empty").mkdir()
    unread = JobSpec("finetune", ("--task", "sst2", "--data", str(tmp_path / "empty"), "--epochs", "2"), device="cpu")
    blind = estimate_spec(unread, cwd=REPO, runs_dir=runs, measure=False)
    assert blind.problem and blind.steps is None and blind.total_s is None


def test_a_finetuning_estimate_times_the_steps_the_job_runs(runs, tmp_path):
    """Estimate a short fine-tuning job (timed here now, on the job's one thread), run it, and check the
    estimate counted the steps the run took. How close its seconds come to the run's is measured by
    `bench/bench_estimates.py` (timings belong in benchmarks, not in asserts)."""
    from bertlab.finetune.cli import config_from_args
    from bertlab.finetune.recipe import run_finetuning
    from bertlab.jobs.spec import finetune_args, parse_recipe_args

    data = _write_sst2(tmp_path / "sst2")
    args = (*finetune_args("sst2", str(data), max_steps=12, batch_size=16), "--threads", "1")
    est = estimate_spec(JobSpec("finetune", args, device="cpu"), cwd=REPO, runs_dir=runs)
    assert est.throughput_source.startswith("timed here now") and "1 of " in est.throughput_source
    run_dir = tmp_path / "run"
    result = run_finetuning(config_from_args(parse_recipe_args("finetune", args)), run_dir, progress_bar=False)
    assert est.steps == result.progress.step == 12
    assert est.seconds > 0 and est.tokens_per_s > 0


def test_compiling_adds_its_seconds_in_front():
    cfg = preset("tiny", vocab_size=300)
    eager = estimate(cfg, batch_size=8, seq_length=32, max_steps=10, measure=False)
    compiled = estimate(cfg, batch_size=8, seq_length=32, max_steps=10, measure=False, compile=True)
    assert eager.compile_s == 0 and compiled.compile_s == compile_seconds(cfg, "cpu") > 0
    assert compiled.total_s == pytest.approx(eager.seconds + compiled.compile_s)
    assert compile_seconds(preset("mini"), "cpu") == pytest.approx(100)  # measured for mini on this CPU
    assert "compiling" in compiled.summary() and "torch.compile" in compiled.notes[0]


def test_a_bilstm_job_is_estimated_with_its_bilstm(runs, tmp_path, monkeypatch):
    """The + BiLSTM ablation row: its head is timed (and tabulated) with the BiLSTM, and an earlier
    run without one is not taken as its throughput."""
    import bertlab.finetune.models as models
    from bertlab.jobs.estimates.timed_step import measured_step_seconds
    from bertlab.jobs.spec import finetune_args

    data = _write_sst2(tmp_path / "sst2")
    plain = (*finetune_args("sst2", str(data), max_steps=10, batch_size=16), "--size", "tiny")
    bilstm = (*plain, "--bilstm")
    tabulated = [
        estimate_spec(JobSpec("finetune", a, device="cpu"), cwd=REPO, runs_dir=runs, measure=False)
        for a in (plain, bilstm)
    ]
    assert tabulated[1].seconds > 1.3 * tabulated[0].seconds  # tiny's BiLSTM: 2 layers of 4 gates x 256 x 128, twice

    heads = []
    real_build = models.build_task_model
    monkeypatch.setattr(models, "build_task_model", lambda config, head: heads.append(head) or real_build(config, head))
    measured_step_seconds.cache_clear()
    estimate_spec(JobSpec("finetune", bilstm, device="cpu"), cwd=REPO, runs_dir=runs)
    assert heads and heads[-1].use_bilstm and heads[-1].shape == "single"

    # an earlier plain run of the same task and shape does not stand in for the BiLSTM job
    run = runs / "plain-earlier"
    run.mkdir(parents=True)
    config = {"data": str(data), "max_seq_length": 128, "task": "sst2", "train": {"batch_size": 16}}
    config |= {"mode": "finetune", "features": "last", "bilstm": False, "lstm_hidden": 0, "lstm_layers": 2}
    shape = {"num_layers": 2, "hidden_size": 128, "num_heads": 2, "intermediate_size": 512}
    (run / "run_config.json").write_text(json.dumps({"kind": "finetune", "config": config, "model_config": shape}))
    (run / "status.json").write_text(json.dumps({"state": "finished", "device": "cpu"}))
    (run / "metrics.jsonl").write_text(
        "".join(json.dumps({"split": "train", "step": s, "seq_per_s": 20.0}) + "\n" for s in range(4))
    )
    est_plain, est_bilstm = (
        estimate_spec(JobSpec("finetune", a, device="cpu"), cwd=REPO, runs_dir=runs, measure=False)
        for a in (plain, bilstm)
    )
    assert est_plain.throughput_source == "measured in run plain-earlier"
    assert not est_bilstm.throughput_source.startswith("measured in run")


def test_a_busy_machine_is_named_beside_a_time_timed_here(runs, monkeypatch):
    import os

    kw = dict(batch_size=4, seq_length=16, max_steps=3, device="cpu", runs_dir=runs, pretraining=False, task="sst2")
    cores = os.cpu_count() or 1
    monkeypatch.setattr(os, "getloadavg", lambda: (2.0 * cores, 0.0, 0.0))
    busy = estimate(preset("tiny"), **kw)
    assert busy.throughput_source.startswith("timed here now")
    assert any("busy now" in n for n in busy.notes)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.1, 0.0, 0.0))
    assert not any("busy now" in n for n in estimate(preset("tiny"), **kw).notes)
    monkeypatch.setattr(os, "getloadavg", lambda: (2.0 * cores, 0.0, 0.0))
    assert not any("busy now" in n for n in estimate(preset("tiny"), measure=False, **kw).notes)  # tabulated


def test_a_micro_batch_too_long_to_time_is_extended_along_a_line_not_scaled_from_one_row():
    from bertlab.jobs.estimates.timed_step import MEASURE_MAX_STEP_S, _micro_batch_seconds

    calls = []

    def timed(rows, trial=0):  # a fixed cost per step and a cost per row, as a CPU step has
        calls.append(rows)
        return 0.08 + 0.03 * rows

    seconds, rows = _micro_batch_seconds(timed, micro=32, tabulated_s=64.0)  # the table guesses one row
    assert seconds == pytest.approx(0.08 + 0.03 * 32)  # scaling one row up would say 32 x 0.11 = 3.5 s
    assert calls[0] == 1 and rows == f"{calls[-2]} and {calls[-1]}"
    assert all(timed(r) <= MEASURE_MAX_STEP_S for r in calls[:-1])  # no step timed much past the cap
    calls.clear()
    assert _micro_batch_seconds(timed, micro=4, tabulated_s=0.01) == (pytest.approx(0.2), "4")  # short: whole
    assert calls == [4]
    # a step already long at the table's guess gets a second, smaller point for its line
    seconds, rows = _micro_batch_seconds(lambda r, trial=0: 0.2 + 0.5 * r, micro=16, tabulated_s=16.0)
    assert seconds == pytest.approx(0.2 + 0.5 * 16) and rows == "1 and 2"
    # a BiLSTM's padded batch needs some rows (min_rows): no point is timed on fewer
    calls.clear()
    seconds, rows = _micro_batch_seconds(timed, micro=32, tabulated_s=64.0, min_rows=3)
    assert min(calls) == 3 and seconds == pytest.approx(0.08 + 0.03 * 32)
    calls.clear()
    seconds, rows = _micro_batch_seconds(lambda r, trial=0: calls.append(r) or 0.2 + 0.5 * r, 16, 16.0, min_rows=3)
    assert calls == [3, 6, 3, 6] and seconds == pytest.approx(0.2 + 0.5 * 16) and rows == "3 and 6"
    calls.clear()
    assert _micro_batch_seconds(timed, micro=2, tabulated_s=64.0, min_rows=3)[1] == "2"  # the whole micro-batch


def test_the_two_points_of_an_extended_line_are_timed_twice_and_keep_their_faster_time():
    """A busy moment under one point tilts the line, and extending it to the micro-batch multiplies the
    error: each point is timed again, the other one timed in between, and the faster time of each is used."""
    from bertlab.jobs.estimates.timed_step import _micro_batch_seconds

    calls = []
    disturbed = {(8, 0): 0.1, (16, 1): 0.2}  # other work on the machine under these timings

    def timed(rows, trial=0):
        calls.append((rows, trial))
        return 0.1 + 0.04 * rows + disturbed.get((rows, trial), 0.0)

    seconds, rows = _micro_batch_seconds(timed, micro=32, tabulated_s=1.0)
    assert rows == "8 and 16" and seconds == pytest.approx(0.1 + 0.04 * 32)  # not 1.18, from the tilted line
    assert calls == [(16, 0), (8, 0), (16, 1), (8, 1)]  # each point again, the other timed in between
    calls.clear()
    assert _micro_batch_seconds(timed, micro=4, tabulated_s=0.01) == (pytest.approx(0.26), "4")
    assert calls == [(4, 0)]  # a micro-batch timed whole needs no line, and no second timing
    # the table's guess took long and the only other point is the whole micro-batch: that is timed, no line
    calls.clear()
    assert _micro_batch_seconds(timed, micro=5, tabulated_s=64.0, min_rows=3) == (pytest.approx(0.3), "5")
    assert calls == [(3, 0), (5, 0)]


def test_a_step_that_is_mostly_fixed_cost_is_timed_whole_when_its_line_puts_it_under_a_second():
    """A BiLSTM's step follows its longest row, not its row count: the table over-guesses it, the small
    steps take nearly as long as the whole one, and their nearly flat line would multiply their noise
    when extended 4-8x. Where the line (of each point's faster time) puts the whole micro-batch under
    MEASURE_WHOLE_MAX_STEP_S, it is timed whole instead."""
    from bertlab.jobs.estimates.timed_step import MEASURE_WHOLE_MAX_STEP_S, _micro_batch_seconds

    calls = []

    def timed(rows, trial=0):  # the first timing of 4 rows was disturbed: alone, its line would say 1.2 s
        calls.append((rows, trial))
        return 0.45 + 0.005 * rows + (0.4 if (rows, trial) == (4, 0) else 0.0)

    seconds, rows = _micro_batch_seconds(timed, micro=32, tabulated_s=4.0, min_rows=3)
    assert (seconds, rows) == (pytest.approx(0.45 + 0.005 * 32), "32")
    assert calls == [(4, 0), (8, 0), (4, 1), (8, 1), (32, 0)]
    assert 0.45 + 0.005 * 32 < MEASURE_WHOLE_MAX_STEP_S
    # the doubling goes by the line too: a flat line lets it double past where twice the last time would stop
    calls.clear()
    seconds, rows = _micro_batch_seconds(lambda r, trial=0: calls.append(r) or 0.1 + 0.01 * r, 64, 8.0)
    assert (seconds, rows) == (pytest.approx(0.74), "64")
    assert calls == [4, 8, 16, 32, 16, 32, 64]  # 16 rows 0.26 s: twice that is over the cap, the line's 0.42 s is not


def test_a_step_is_timed_in_the_precision_the_job_will_train_in(monkeypatch):
    import bertlab.jobs.estimates.timed_step as timed_step

    cfg = preset("tiny", vocab_size=300)
    kw = dict(batch_size=4, seq_length=16, max_steps=3, device="cpu", pretraining=True)
    timed_step.measured_step_seconds.cache_clear()
    assert estimate(cfg, precision="fp32", **kw).throughput_source.endswith(", fp32)")
    monkeypatch.setattr("bertlab.training.optimization.cpu_bf16_instructions", lambda: "AMX")
    timed_step.measured_step_seconds.cache_clear()
    assert estimate(cfg, precision="auto", **kw).throughput_source.endswith("bf16 autocast (CPU, AMX))")
    monkeypatch.setattr("bertlab.training.optimization.cpu_bf16_instructions", lambda: None)
    timed_step.measured_step_seconds.cache_clear()
    assert estimate(cfg, precision="auto", **kw).throughput_source.endswith(", fp32)")  # no bf16 here: fp32


def test_a_bilstm_head_is_timed_on_rows_padded_as_the_jobs_are(monkeypatch):
    """A BiLSTM runs on packed sequences, so its cost follows the real tokens: the timed batch has one row
    as long as the batch and the others shorter, averaging the task's real tokens a row (timing every row
    full over-estimated a frozen-feature UPOS job 1.65x). A head without a BiLSTM is timed on full rows."""
    import bertlab.finetune.models as models
    import bertlab.jobs.estimates.timed_step as timed_step
    from bertlab.finetune.models import HeadConfig
    from bertlab.jobs.estimates.task_tokens import TaskTokens

    seen = []
    real_forward = models.BertForTokenClassification.forward

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, **kw):
        seen.append(attention_mask.sum(1).tolist())
        return real_forward(self, input_ids, token_type_ids, attention_mask, **kw)

    monkeypatch.setattr(models.BertForTokenClassification, "forward", forward)
    cfg = preset("tiny", vocab_size=300)
    tokens = TaskTokens(real_per_row=12.0, padded_per_row=30.0, longest=40, features=100, source="test")
    kw = dict(batch_size=8, seq_length=40, max_steps=3, pretraining=False, tokens=tokens, task="upos")
    for mode, bilstm in (("feature", True), ("finetune", False)):
        head = HeadConfig(shape="tagging", num_labels=3, mode=mode)
        assert head.use_bilstm is bilstm
        seen.clear()
        timed_step.measured_step_seconds.cache_clear()
        estimate(cfg, trainable_fraction=0.01 if bilstm else 1.0, head=head, **kw)
        assert seen
        for lengths in seen:
            assert max(lengths) == 30  # the batch's longest row
            if bilstm:
                assert sum(lengths) / len(lengths) == pytest.approx(12.0, abs=1.0)
            else:
                assert set(lengths) == {30}
    # the table for a model too big to time here: the encoder on every padded token, a BiLSTM on the real ones
    full = TaskTokens(real_per_row=30.0, padded_per_row=30.0, longest=40, features=100, source="test")
    for mode, bilstm in (("feature", True), ("finetune", False)):
        head = HeadConfig(shape="tagging", num_labels=3, mode=mode)
        short, long = (estimate(cfg, head=head, measure=False, **(kw | {"tokens": t})) for t in (tokens, full))
        assert (short.seconds < long.seconds) is bilstm
    assert timed_step._other_rows_length(1, 30, 12.0) == 30  # one row: it is the longest
    assert timed_step._other_rows_length(8, 30, 2.0) == 1  # never an empty row


def test_a_pretraining_token_budget_is_the_steps_the_trainer_takes(runs, tmp_path, vocab_file):
    """The trainer counts real (unpadded) tokens against train.max_tokens; the estimate counted full
    rows, so it planned too few steps (half as many on a corpus of short documents)."""
    from bertlab.training.pretrain import run_pretraining
    from bertlab.training.pretrain_config import load_config_file

    corpus = tmp_path / "short-docs.txt"  # two-sentence documents: instances far shorter than 64 tokens
    corpus.write_text("\n\n".join("the cat sat on the mat .\nthe dog ran to the park ." for _ in range(60)) + "\n")
    overrides = (
        f"corpus=[{corpus}]",
        f"vocab={vocab_file}",
        "model_overrides={num_layers: 1, hidden_size: 32, num_heads: 2, intermediate_size: 64}",
        "data.max_seq_length=64",
        "train.batch_size=8",
        "train.max_tokens=4000",
        "train.eval_every=0",
        "train.save_every=0",
        "train.save_every_s=0",
        "eval_instances=8",
        f"cache_dir={tmp_path / 'cache'}",
    )
    spec = JobSpec("pretrain", ("--config", "configs/tiny.yaml", *overrides), device="cpu")
    est = estimate_spec(spec, cwd=REPO, runs_dir=runs, measure=False)
    assert est.tokens_per_step < 8 * 64 * 0.5  # about 16 real tokens a row
    result = run_pretraining(
        load_config_file("configs/tiny.yaml", list(overrides)), tmp_path / "run", progress_bar=False
    )
    assert result.state == "finished"
    assert abs(est.steps - result.progress.step) <= 0.1 * result.progress.step, (est.steps, result.progress.step)


def test_a_corpus_that_cannot_make_instances_is_the_estimates_problem(runs, tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    spec = JobSpec("pretrain", ("--config", "configs/tiny.yaml", f"corpus={empty}", "train.max_steps=5"), device="cpu")
    est = estimate_spec(spec, cwd=REPO, runs_dir=runs, measure=False)  # the page shows it and refuses to launch
    assert "fewer than two documents" in est.problem and est.notes[0] == est.problem


def test_a_two_phase_pretraining_is_estimated_phase_by_phase(runs, job_data):
    """phase2 switches to longer sequences for the last share of the budget: those steps cost more and
    hold more tokens (the estimate timed every step at the first phase's length)."""
    corpus, cache = job_data
    base = ("--config", "configs/tiny.yaml", f"corpus={corpus}", f"cache_dir={cache}", "data.max_seq_length=32")
    one = estimate_spec(JobSpec("pretrain", (*base, "train.max_steps=400"), device="cpu"), cwd=REPO, measure=False)
    two = estimate_spec(
        JobSpec("pretrain", (*base, "train.max_steps=400", "phase2={at: 0.75, max_seq_length: 64}"), device="cpu"),
        cwd=REPO,
        measure=False,
    )
    assert two.steps == 400 and two.notes[0].startswith("two phases: 300 steps of 32-token sequences")
    assert "then 100 of 64" in two.notes[0]
    assert two.seconds > one.seconds and two.tokens_per_step > one.tokens_per_step
    assert two.total_gb >= one.total_gb  # memory for the longer sequences
    # a token budget: each phase holds its share of the tokens at its own tokens a step
    tokens = estimate_spec(
        JobSpec("pretrain", (*base, "train.max_tokens=200000", "phase2={at: 0.5, max_seq_length: 64}"), device="cpu"),
        cwd=REPO,
        measure=False,
    )
    assert abs(tokens.steps * tokens.tokens_per_step - 200_000) < 0.02 * 200_000


def test_a_job_beside_others_gets_its_share_of_the_cores(monkeypatch):
    """Several CPU slots: each job without --threads gets the physical cores shared among the slots, not
    all of them (two 2-thread jobs on a 2-core CPU ran 4-80x slower each; two 1-thread ones ~1.05x)."""
    from bertlab.hardware import default_threads

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    cores = default_threads(cpu_slots=1)  # one a physical core
    assert default_threads() == cores >= 1
    assert default_threads(cpu_slots=2) == max(1, cores // 2) and default_threads(cpu_slots=10 * cores) == 1
    monkeypatch.setenv("BERTLAB_CPU_SLOTS", "2")  # what the queue was started with, read by the app's estimates
    assert default_threads() == max(1, cores // 2)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # the user's own setting wins
    assert default_threads() == default_threads(cpu_slots=2) == 3


def test_a_step_is_timed_on_the_threads_the_job_will_have(monkeypatch):
    """The app answers on one thread of two; a job without --threads trains on torch's default, and its
    step was timed on the app's one (the Train page's estimate came out ~2x long on a quiet machine)."""
    import torch

    import bertlab.jobs.estimates.timed_step as timed_step
    from bertlab.hardware import default_threads

    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert default_threads() == 3
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert default_threads() >= 1
    seen = []
    real = torch.set_num_threads
    monkeypatch.setattr(torch, "set_num_threads", lambda n: (seen.append(n), real(n)))
    monkeypatch.setattr(timed_step, "default_threads", lambda: 2)
    monkeypatch.setattr("bertlab.jobs.estimates.step_time.default_threads", lambda: 2)  # an earlier run's threads too
    before = torch.get_num_threads()
    timed_step.measured_step_seconds.cache_clear()
    estimate(preset("tiny", vocab_size=300), batch_size=4, seq_length=16, max_steps=3, device="cpu", threads=0)
    assert seen and seen[0] == 2 and torch.get_num_threads() == before  # the job's threads, then put back


def test_a_run_of_a_few_steps_is_said_to_teach_next_to_nothing(runs, job_data):
    corpus, cache = job_data
    few = estimate_spec(tiny_spec(corpus, cache, steps=1), cwd=REPO, runs_dir=runs, measure=False)
    assert few.notes[0].startswith("a run of 1 step checks that the job works but teaches the model next to nothing")
    assert not any(
        "next to nothing" in n
        for n in estimate_spec(tiny_spec(corpus, cache, steps=40), cwd=REPO, runs_dir=runs, measure=False).notes
    )


def test_phase_steps_split_as_the_trainer_switches_and_paths_are_read_from_the_jobs_folder(
    runs, job_data, tmp_path, monkeypatch
):
    """The trainer switches at the first step at or past phase2.at (ceil(at x N) steps, then the rest):
    5 steps at 0.7 are 4 + 1 (not round(3.5) + round(1.5) = 6), 1 step is all phase 1. A relative corpus
    path is the job's folder's, not the app's working folder's (a valid job could not be launched)."""
    corpus, cache = job_data
    jobs_folder = tmp_path / "project"
    (jobs_folder / "data").mkdir(parents=True)
    (jobs_folder / "data" / "c.txt").write_text(corpus.read_text())
    monkeypatch.chdir(tmp_path)  # the app started elsewhere
    base = ("--config", str(REPO / "configs" / "tiny.yaml"), "corpus=[data/c.txt]", f"cache_dir={cache}")
    phased = (*base, "data.max_seq_length=32", "phase2={at: 0.7, max_seq_length: 64}")
    five = estimate_spec(
        JobSpec("pretrain", (*phased, "train.max_steps=5"), device="cpu"), cwd=jobs_folder, measure=False
    )
    assert not five.problem and five.steps == 5 and "4 steps of 32-token sequences" in five.notes[1]
    one = estimate_spec(
        JobSpec("pretrain", (*phased, "train.max_steps=1"), device="cpu"), cwd=jobs_folder, measure=False
    )
    assert one.steps == 1 and not any("two phases" in n for n in one.notes)
    assert one.padded_tokens_per_step == 32 * 32  # batch 32, every row padded to the full 32 tokens


def test_a_run_of_over_a_day_is_a_warning_and_a_few_steps_one_too(runs, job_data):
    """Large on a 2-core CPU read '302 h' with no word beside it; a run over a day is now a warning, as a
    run too short to learn and one that does not fit are. Other notes stay captions."""
    corpus, cache = job_data
    short = estimate_spec(tiny_spec(corpus, cache, steps=40), cwd=REPO, runs_dir=runs, measure=False)
    assert short.total_s < 24 * 3600 and short.warnings == ()
    assert any("data preparation" in n for n in short.notes)  # a caption, not a warning
    days = estimate_spec(tiny_spec(corpus, cache, steps=10**9), cwd=REPO, runs_dir=runs, measure=False)
    (long,) = days.warnings
    assert long.startswith("this run takes over a day (~") and "a GPU" in long
    few = estimate_spec(tiny_spec(corpus, cache, steps=1), cwd=REPO, runs_dir=runs, measure=False)
    assert any("next to nothing" in n for n in few.warnings)


@pytest.mark.parametrize(
    ("model_type", "objective", "overrides", "built"),
    [
        ("albert", "mlm_sop", (("embedding_size", 16),), "AlbertForPreTraining"),
        ("electra", "electra", (("generator_size", 0.5),), "ElectraPair"),
        ("roberta", "roberta", (), "RobertaForMaskedLM"),
    ],
)
def test_a_pretraining_step_is_timed_on_the_jobs_own_family(monkeypatch, model_type, objective, overrides, built):
    """The Train page's estimate times the family's model with its objective's loss, not BERT's."""
    from bertlab.jobs.estimates import timed_step
    from bertlab.models import registry

    made = []
    real_build = registry.build_model
    monkeypatch.setattr(timed_step, "build_model", lambda config: made.append(real_build(config)) or made[-1])
    family = timed_step.PretrainingModel(model_type, objective, overrides)
    config = preset("tiny", vocab_size=200, max_position_embeddings=64, use_nsp_head=False)
    seconds = timed_step.measured_step_seconds(config, 2, 16, "cpu", True, 4, False, 1, None, "fp32", 0.0, 0, family)
    assert seconds > 0 and type(made[0]).__name__ == built
    timed_step.measured_step_seconds.cache_clear()


def test_a_fine_tuning_step_is_timed_on_the_starting_models_family(
    runs, tmp_path, monkeypatch, tiny_albert_checkpoint, tiny_electra_pair
):
    """An ALBERT folder's fine-tuning is timed on ALBERT's encoder; an ELECTRA pair's on its discriminator."""
    from bertlab.finetune import models
    from bertlab.jobs.estimates import timed_step

    _write_sst2(tmp_path / "sst2")
    built = []
    real = models.build_task_model
    monkeypatch.setattr(models, "build_task_model", lambda config, head: built.append(real(config, head)) or built[-1])
    for folder, encoder in ((tiny_albert_checkpoint, "albert"), (tiny_electra_pair, "electra")):
        args = ("--task", "sst2", "--data", str(tmp_path / "sst2"), "--model", str(folder), "--max-steps", "2")
        estimate_spec(JobSpec("finetune", args, device="cpu"), cwd=REPO, runs_dir=runs)
        assert built and built[-1].encoder_name == encoder
        assert getattr(built[-1].config, "role", "discriminator") == "discriminator"
        timed_step.measured_step_seconds.cache_clear()
