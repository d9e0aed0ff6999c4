"""bertlab.training.pretrain + bertlab.training.trainer: a tiny pretraining run learns, resumes exactly, runs
under torchrun with gloo, and the shipped default model answers in the CLI."""

import dataclasses
import json
import logging
import math
import multiprocessing
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

import pytest
import torch
from conftest import WORDS
from torch.testing import assert_close

from bertlab.errors import BertLabError, InputError
from bertlab.model import BertForPreTraining
from bertlab.storage.checkpoint import read_weights
from bertlab.storage.runfolder import read_metrics
from bertlab.training.optimization import lr_factor
from bertlab.training.pretrain import prepare_data, prepare_tokenizer, run_pretraining
from bertlab.training.pretrain_config import load_config_file

REPO = Path(__file__).resolve().parent.parent


def _write_corpus(path: Path, n_docs=40, seed=0) -> Path:
    """Google-format corpus with learnable structure: each document repeats a few patterns."""
    rng = random.Random(seed)
    lines = []
    for _ in range(n_docs):
        topic = rng.sample(WORDS, 6)
        for _ in range(10):
            k = rng.randint(3, 6)
            lines.append(" ".join(topic[:2] + rng.sample(topic, k)) + " .")
        lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def _config(tmp_path, vocab_file, **train):
    corpus = _write_corpus(tmp_path / "corpus.txt")
    overrides = [
        f"corpus=[{corpus}]",
        f"vocab={vocab_file}",
        "size=tiny",
        "model_overrides={hidden_size: 32, num_layers: 2, num_heads: 2, intermediate_size: 64, max_position_embeddings: 64}",
        "data.max_seq_length=32",
        "data.dupe_factor=2",
        f"cache_dir={tmp_path / 'cache'}",
        "eval_instances=64",
        "train.device=cpu",  # the CPU path (its precision, exact resume) on GPU machines too
        "train.batch_size=8",
        "train.learning_rate=2e-3",
        "train.warmup=0.1",
        "train.log_every=5",
        "train.eval_every=0",
        "train.save_every=0",
        "train.save_every_s=0",
    ] + [f"train.{k}={v}" for k, v in train.items()]
    return load_config_file(None, overrides)


def test_tiny_pretraining_loss_falls(tmp_path, vocab_file):
    cfg = _config(tmp_path, vocab_file, max_steps=60)
    result = run_pretraining(cfg, tmp_path / "run", progress_bar=False)
    assert result.state == "finished" and result.progress.step == 60
    train = [m for m in read_metrics(tmp_path / "run") if m["split"] == "train"]
    assert train[-1]["loss"] < train[0]["loss"] - 0.6
    evals = [m for m in read_metrics(tmp_path / "run") if m["split"] == "eval"]
    assert {"mlm_acc", "mlm_loss", "mlm_perplexity", "nsp_acc"} <= set(evals[-1])
    vocab_size = len(vocab_file.read_text().split())
    assert evals[-1]["mlm_loss"] < math.log(vocab_size)  # better than a uniform guess on held-out text
    status = json.loads((tmp_path / "run" / "status.json").read_text())
    assert status["state"] == "finished"
    card = json.loads((tmp_path / "run" / "model" / "model_card.json").read_text())
    assert card["steps"] == 60 and "mlm_acc" in card["metrics"]
    # the precision and the compile decision (auto: a minute of training never pays for compiling)
    # are in the status and the card
    assert status["precision"] == card["precision"] and card["precision"] in (
        "fp32",
        "bf16 autocast (CPU, AMX)",
        "bf16 autocast (CPU, AVX-512 BF16)",
    )
    assert status["compile"] == card["compile"] == "no" and "staying eager" in card["compile_reason"]
    from bertlab.inference import load_model

    lm = load_model(tmp_path / "run" / "model", device="cpu")
    assert lm.fill_mask("the cat [MASK] on the mat .").masks[0].candidates


@pytest.mark.parametrize("compiled_is_faster", [False, True])
def test_auto_compile_keeps_the_compiled_step_only_where_it_measured_faster(
    tmp_path, vocab_file, monkeypatch, compiled_is_faster
):
    # compile='auto' compiles on an expected gain (forced here: on a CPU it no longer compiles, since compiled
    # steps measured 0.76-0.82x eager at vocabulary 8192); where they then run slower it must time them and
    # go back to eager steps.
    # No real compiling in a test: torch.compile stands in as a wrapper. No wall clock either (under load
    # a real 50 ms sleep was lost in the noise): the trainer's clock moves only when the model runs, 10 ms
    # a step for the kind that should win and 60 ms for the other.
    monkeypatch.setattr("bertlab.training.auto_compile.compile_pays", lambda *a: (True, "assumed to pay"))
    clock = [time.time()]
    monkeypatch.setattr(
        "bertlab.training.trainer.time", types.SimpleNamespace(time=lambda: clock[0], strftime=time.strftime)
    )
    compiled_call = [False]

    def fake_compile(model):
        def call(*args, **kwargs):
            compiled_call[0] = True
            try:
                return model(*args, **kwargs)
            finally:
                compiled_call[0] = False

        return call

    def advance_clock(module, _args):
        if isinstance(module, BertForPreTraining):
            clock[0] += 0.06 if compiled_call[0] != compiled_is_faster else 0.01

    monkeypatch.setattr("bertlab.training.trainer.torch.compile", fake_compile)
    cfg = _config(tmp_path, vocab_file, max_steps=40)
    hook = torch.nn.modules.module.register_module_forward_pre_hook(advance_clock)
    try:
        result = run_pretraining(cfg, tmp_path / "run", progress_bar=False)
    finally:
        hook.remove()
    assert result.state == "finished" and result.progress.step == 40
    card = json.loads((tmp_path / "run" / "model" / "model_card.json").read_text())
    status = json.loads((tmp_path / "run" / "status.json").read_text())
    if compiled_is_faster:
        assert status["compile"] == card["compile"] == "yes" and card["compile_speedup"] > 1.0
    else:
        assert status["compile"] == card["compile"] == "no" and card["compile_speedup"] < 1.0
        assert "assumed to pay; compiled step measured" in card["compile_reason"]
        assert "back to eager" in card["compile_reason"]


def test_a_cpu_run_on_a_gpu_machine_says_cpu_in_its_card(tmp_path, vocab_file, monkeypatch):
    # the card's hardware line follows train.device, not the machine: a CPU run on an H200 once said 'NVIDIA H200 x1'
    from bertlab.data.corpus import load_corpus
    from bertlab.training.pretrain import card_of_run

    cfg = _config(tmp_path, vocab_file, max_steps=1, num_threads=2)
    corpus = load_corpus(cfg.corpus, cfg.corpus_format)
    tokenizer = prepare_tokenizer(cfg, tmp_path / "run", corpus.documents)
    train_stores, _, _ = prepare_data(cfg, corpus, tokenizer)
    model_config = cfg.model_config(len(tokenizer))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H200")
    on_cpu = card_of_run(cfg, model_config, corpus, train_stores[0], "bertlab pretrain")["hardware"]
    assert on_cpu.startswith("CPU (") and on_cpu.endswith(", 2 threads)")
    auto = dataclasses.replace(cfg, train=dataclasses.replace(cfg.train, device="auto"))
    assert card_of_run(auto, model_config, corpus, train_stores[0], "bertlab pretrain")["hardware"] == "NVIDIA H200 x1"


def test_eta_is_never_negative_and_log_lines_go_above_the_progress_bar(tmp_path, vocab_file, capsys):
    # a time budget overshoots a little on its last step: progress > 1 once made the ETA negative
    cfg = _config(tmp_path, vocab_file, max_time_s=1.0, log_every=1, eval_every=1)
    root, handler = logging.getLogger(), logging.StreamHandler(sys.stderr)  # what `bertlab -v` sets up
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        run_pretraining(cfg, tmp_path / "run", progress_bar=True)
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    train = [m for m in read_metrics(tmp_path / "run") if m["split"] == "train"]
    assert train and all(m["eta_s"] >= 0 for m in train)
    assert train[-1]["progress"] >= 1.0 and train[-1]["eta_s"] == 0
    assert json.loads((tmp_path / "run" / "status.json").read_text())["eta_s"] == 0
    err = capsys.readouterr().err
    assert "eta=-" not in err and "eta=" in err
    evals = [m.start() for m in re.finditer("eval step", err)]
    assert evals and all(err[i - 1] in "\r\n" for i in evals), err  # each on a line of its own, not after the bar


def test_resume_after_stop_matches_uninterrupted_run(tmp_path, vocab_file):
    a = tmp_path / "a"
    b = tmp_path / "b"
    a.mkdir()
    b.mkdir()
    cfg_a = _config(a, vocab_file, max_steps=24)
    cfg_b = _config(b, vocab_file, max_steps=24)
    run_pretraining(cfg_a, a / "run", progress_bar=False)
    stopped = run_pretraining(cfg_b, b / "run", progress_bar=False, stop_after_steps=10)
    assert stopped.state == "cancelled" and stopped.progress.step == 10
    assert json.loads((b / "run" / "status.json").read_text())["state"] == "cancelled"
    with pytest.raises(InputError, match="--resume"):
        run_pretraining(cfg_b, b / "run", progress_bar=False)
    resumed = run_pretraining(cfg_b, b / "run", resume=True, progress_bar=False)
    assert resumed.state == "finished" and resumed.progress.step == 24
    wa, wb = read_weights(a / "run" / "model"), read_weights(b / "run" / "model")
    assert wa.keys() == wb.keys()
    for k in wa:
        assert_close(wa[k], wb[k], atol=1e-6, rtol=1e-5, msg=k)
    la = [m["loss"] for m in read_metrics(a / "run") if m["split"] == "train"]
    lb = [m["loss"] for m in read_metrics(b / "run") if m["split"] == "train"]
    assert la == pytest.approx(lb, rel=1e-5)


def _two_phase(tmp_path, vocab_file, **train):
    cfg = _config(tmp_path, vocab_file, max_steps=20, log_every=1, **train)
    return dataclasses.replace(cfg, phase2={"at": 0.5, "max_seq_length": 48, "max_predictions_per_seq": 7})


def test_two_phase_schedule_continues_optimizer_and_lr(tmp_path, vocab_file):
    cfg = _two_phase(tmp_path, vocab_file)
    result = run_pretraining(cfg, tmp_path / "run", progress_bar=False)
    assert result.state == "finished" and result.progress.phase == 1
    train = [m for m in read_metrics(tmp_path / "run") if m["split"] == "train"]
    assert [m["step"] for m in train] == list(range(1, 21))
    # one warm-up + linear decay over the whole budget: the LR does not restart at the length change
    for m in train:
        assert m["lr"] == pytest.approx(cfg.train.learning_rate * lr_factor((m["step"] - 1) / 20, 0.1))
    # the optimizer carries on: Adam's step count covers both phases
    state = torch.load(tmp_path / "run" / "checkpoint" / "trainer_state.pt", weights_only=True)
    assert {int(s["step"]) for s in state["optimizer"]["state"].values()} == {20}
    # phase 2 feeds longer sequences: more tokens per step than phase 1 (same batch size)
    per_step = [b["tokens"] - a["tokens"] for a, b in zip(train, train[1:], strict=False)]
    assert sum(per_step[10:]) / 9 > 1.2 * sum(per_step[:9]) / 9
    card = json.loads((tmp_path / "run" / "model" / "model_card.json").read_text())
    assert card["phase2"]["max_seq_length"] == 48 and card["eval_data"]["max_seq_length"] == 48


def test_two_phase_resume_across_the_length_change_is_exact(tmp_path, vocab_file):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    run_pretraining(_two_phase(a, vocab_file), a / "run", progress_bar=False)
    cfg_b = _two_phase(b, vocab_file)
    assert run_pretraining(cfg_b, b / "run", progress_bar=False, stop_after_steps=7).progress.phase == 0
    resumed = run_pretraining(cfg_b, b / "run", resume=True, progress_bar=False)
    assert resumed.state == "finished" and resumed.progress.step == 20
    wa, wb = read_weights(a / "run" / "model"), read_weights(b / "run" / "model")
    for k in wa:
        assert_close(wa[k], wb[k], atol=1e-6, rtol=1e-5, msg=k)


def test_eval_data_fixes_the_heldout_instances(tmp_path, vocab_file):
    cfg = _config(tmp_path, vocab_file, max_steps=2)
    cfg = dataclasses.replace(
        cfg,
        data=dataclasses.replace(cfg.data, masked_lm_prob=0.4, max_predictions_per_seq=13),
        eval_data={"masked_lm_prob": 0.15, "max_predictions_per_seq": 5},
    )
    run_pretraining(cfg, tmp_path / "run", progress_bar=False)
    card = json.loads((tmp_path / "run" / "model" / "model_card.json").read_text())
    assert card["eval_data"]["masked_lm_prob"] == 0.15 and card["data_config"]["masked_lm_prob"] == 0.4


def test_snapshots_are_written_at_log_spaced_steps_and_load(tmp_path, vocab_file):
    cfg = _config(tmp_path, vocab_file, max_steps=25, snapshots=True)
    run_pretraining(cfg, tmp_path / "run", progress_bar=False)
    snaps = sorted(p.name for p in (tmp_path / "run" / "snapshots").iterdir())
    assert snaps == ["step-0000010", "step-0000020", "step-0000025"]
    from bertlab.inference import load_model

    for name in snaps:
        card = json.loads((tmp_path / "run" / "snapshots" / name / "model_card.json").read_text())
        assert card["snapshot"] is True and card["steps"] == int(name[5:]) and "mlm_acc" in card["metrics"]
        lm = load_model(tmp_path / "run" / "snapshots" / name, device="cpu")
        assert lm.fill_mask("the cat [MASK] on the mat .").masks[0].candidates
    assert (
        read_weights(tmp_path / "run" / "snapshots" / "step-0000010")["bert.embeddings.word_embeddings.weight"].dtype
        == torch.float16
    )
    evals = {m["step"] for m in read_metrics(tmp_path / "run") if m["split"] == "eval"}
    assert {10, 20, 25} <= evals  # every snapshot has its held-out score
    # the exported model carries its learning history and its card the held-out curve
    from bertlab.training.export import export_run
    from bertlab.training.history import load_history

    out = export_run(tmp_path / "run", tmp_path / "shipped")
    assert load_history(out).steps == [10, 20, 25]
    card = json.loads((out / "model_card.json").read_text())
    assert [c["step"] for c in card["learning_curve"]][-3:] == [10, 20, 25]
    assert "Learning curve" in (out / "README.md").read_text()


def test_a_save_killed_between_its_renames_resumes_from_the_newest_copy(tmp_path, vocab_file):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    run_pretraining(_config(a, vocab_file, max_steps=24), a / "run", progress_bar=False)
    cfg = _config(b, vocab_file, max_steps=24)
    run_pretraining(cfg, b / "run", progress_bar=False, stop_after_steps=10)
    run = b / "run"
    # killed between the renames: the checkpoint exists only as .checkpoint.old-*, and a newer,
    # half-written .checkpoint.tmp-* lies beside it
    (run / "checkpoint").rename(run / ".checkpoint.old-999")
    half = run / ".checkpoint.tmp-abc"
    (half / "model").mkdir(parents=True)
    (half / "trainer_state.pt").write_bytes(b"PK\x03\x04 truncated")
    (run / ".model.tmp-def").mkdir()  # a final model save and a snapshot save killed earlier
    (run / ".model.tmp-def" / "model.safetensors").write_bytes(b"half")
    (run / "snapshots" / ".step-0000010.tmp-ghi").mkdir(parents=True)
    with open(run / "metrics.jsonl", "a") as f:  # lines written after that checkpoint, before the kill
        f.write('{"split": "train", "step": 15, "loss": 1.0}\n{"split": "train", "step": 20, "lo')
    resumed = run_pretraining(cfg, run, resume=True, progress_bar=False)
    assert resumed.state == "finished" and resumed.progress.step == 24
    assert not list(run.glob(".checkpoint.*"))  # leftovers cleaned
    assert not list(run.glob(".model.*")) and not list((run / "snapshots").glob(".*"))
    wa, wb = read_weights(a / "run" / "model"), read_weights(run / "model")
    for k in wa:
        assert_close(wa[k], wb[k], atol=1e-6, rtol=1e-5, msg=k)
    # the metrics written between the checkpoint and the kill are not repeated
    train_steps = [m["step"] for m in read_metrics(run) if m["split"] == "train"]
    assert train_steps == sorted(set(train_steps))


def test_a_run_that_fails_while_preparing_is_marked_failed(tmp_path, vocab_file):
    cfg = dataclasses.replace(_config(tmp_path, vocab_file, max_steps=2), corpus=(str(tmp_path / "missing.txt"),))
    with pytest.raises(BertLabError, match="missing.txt"):
        run_pretraining(cfg, tmp_path / "run", progress_bar=False)
    status = json.loads((tmp_path / "run" / "status.json").read_text())
    assert status["state"] == "failed" and "missing.txt" in status["error"]


def _poison_gradients(monkeypatch, steps):
    """From the training loop's view, the loss blows up at the given steps: every gradient becomes NaN."""
    from bertlab.training.trainer import Trainer

    original = Trainer.accumulate

    def accumulate(self, batch, group_size):
        original(self, batch, group_size)
        if self.progress.step + 1 in steps:
            for param in self.model.parameters():
                if param.grad is not None:
                    param.grad.fill_(float("nan"))

    monkeypatch.setattr(Trainer, "accumulate", accumulate)


def test_a_step_with_nan_gradients_makes_no_update_and_training_goes_on(tmp_path, vocab_file, monkeypatch):
    _poison_gradients(monkeypatch, {7})
    cfg = _config(tmp_path, vocab_file, max_steps=20)
    result = run_pretraining(cfg, tmp_path / "run", progress_bar=False)
    assert result.state == "finished" and result.progress.skipped_steps == 1
    weights = read_weights(tmp_path / "run" / "model")
    assert all(torch.isfinite(w).all() for w in weights.values() if w.is_floating_point())
    train = [m for m in read_metrics(tmp_path / "run") if m["split"] == "train"]
    assert train[-1]["skipped_steps"] == 1 and all(math.isfinite(m["loss"]) for m in train)


def test_a_run_whose_gradients_stay_nan_stops_as_diverged(tmp_path, vocab_file, monkeypatch):
    from bertlab.errors import TrainingDiverged
    from bertlab.training.trainer import NONFINITE_STEPS_LIMIT

    _poison_gradients(monkeypatch, set(range(4, 100)))
    cfg = _config(tmp_path, vocab_file, max_steps=60)
    with pytest.raises(
        TrainingDiverged, match=r"diverged at step 13 .*not finite for 10 steps in a row.*learning_rate"
    ):
        run_pretraining(cfg, tmp_path / "run", progress_bar=False)
    assert NONFINITE_STEPS_LIMIT == 10
    status = json.loads((tmp_path / "run" / "status.json").read_text())
    assert status["state"] == "failed" and "diverged at step 13" in status["error"]


def test_a_run_folder_that_another_live_process_trains_is_refused(tmp_path, vocab_file):
    """(#14) a `--resume` typed while a job trains the same folder made two trainers interleave
    their checkpoints and metrics; it is refused before anything in the folder is touched."""
    from bertlab.hardware import process_start_time

    cfg = _config(tmp_path, vocab_file, max_steps=2)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        run = tmp_path / "run"
        run.mkdir()
        status = {"state": "running", "step": 5, "pid": other.pid, "pid_start": process_start_time(other.pid)}
        (run / "status.json").write_text(json.dumps(status))
        (run / "run_config.json").write_text(json.dumps({"kind": "pretrain", "config": cfg.to_dict()}))
        before = sorted(p.name for p in run.iterdir()), (run / "status.json").read_text()
        for resume in (True, False):
            with pytest.raises(InputError, match=f"being trained by another process \\(pid {other.pid}\\)"):
                run_pretraining(cfg, run, resume=resume, progress_bar=False)
        assert (sorted(p.name for p in run.iterdir()), (run / "status.json").read_text()) == before
        # a job still preparing: status.json names the supervisor, job.json says it was launched
        (run / "status.json").write_text(json.dumps({"state": "preparing", "pid": 1, "pid_start": 1}))
        (run / "job.json").write_text(
            json.dumps({"phase": "launched", "pid": other.pid, "pid_start": process_start_time(other.pid)})
        )
        with pytest.raises(InputError, match="being trained by another process"):
            run_pretraining(cfg, run, resume=True, progress_bar=False)
    finally:
        other.kill()
        other.wait()
    # once that process is gone, the resume goes ahead (and here finds no checkpoint to resume from)
    (run / "job.json").unlink()
    (run / "status.json").write_text(json.dumps(status))
    with pytest.raises(BertLabError) as gone:
        run_pretraining(cfg, run, resume=True, progress_bar=False)
    assert "another process" not in str(gone.value) and "checkpoint" in str(gone.value)


def test_a_run_being_prepared_names_its_process(tmp_path, vocab_file, monkeypatch):
    """(#14) while a run reads its corpus and builds its data (minutes on a big corpus), status.json
    named no process, so a second `--resume` typed meanwhile was not refused."""
    import bertlab.training.pretrain as pretrain
    from bertlab.hardware import own_start_time
    from bertlab.storage.runfolder import other_trainer

    seen = []

    def corpus_that_stops(*args, **kwargs):
        seen.append(json.loads((tmp_path / "run" / "status.json").read_text()))
        raise KeyboardInterrupt  # stands in for a long preparation that is cut short

    monkeypatch.setattr(pretrain, "load_corpus", corpus_that_stops)
    cfg = _config(tmp_path, vocab_file, max_steps=2)
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "run_config.json").write_text(json.dumps({"kind": "pretrain", "config": cfg.to_dict()}))
    (tmp_path / "run" / "status.json").write_text(json.dumps({"state": "stopped", "step": 7}))
    for resume in (False, True):
        with pytest.raises(KeyboardInterrupt):
            run_pretraining(cfg, tmp_path / "run", resume=resume, progress_bar=False)
        assert seen[-1]["state"] == "preparing" and seen[-1]["pid"] == os.getpid()
        assert seen[-1]["pid_start"] == own_start_time()
    assert seen[0]["step"] == 0
    assert other_trainer(tmp_path / "run") is None  # its own folder, for this process
    # a first `--resume` still preparing in another process: a second one is refused
    first = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from bertlab.storage.runfolder import mark_preparing; "
            "mark_preparing(sys.argv[1], resume=True); print('ready', flush=True); time.sleep(60)",
            str(tmp_path / "run"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert first.stdout.readline().strip() == "ready"
        with pytest.raises(InputError, match=f"being trained by another process \\(pid {first.pid}\\)"):
            run_pretraining(cfg, tmp_path / "run", resume=True, progress_bar=False)
    finally:
        first.kill()
        first.wait()


def test_ablation_objectives_train(tmp_path, vocab_file):
    for objective in ("mlm", "ltr"):
        d = tmp_path / objective
        d.mkdir()
        cfg = _config(d, vocab_file, max_steps=3)
        cfg = _config(d, vocab_file, max_steps=3)
        import dataclasses

        cfg = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, objective=objective))
        result = run_pretraining(cfg, d / "run", progress_bar=False)
        assert result.state == "finished"
        config = json.loads((d / "run" / "model" / "config.json").read_text())
        assert config["bertlab"]["use_nsp_head"] is False
        assert config["bertlab"]["attention_direction"] == ("left_to_right" if objective == "ltr" else "bidirectional")


def test_continued_pretraining_starts_from_a_checkpoint(tmp_path, vocab_file):
    """init_from copies a checkpoint's weights and vocabulary; the card adds up the lineage; a run
    without dropout keeps the config's dropout for later fine-tuning; a misfit is a clear error."""
    first = run_pretraining(_config(tmp_path, vocab_file, max_steps=6), tmp_path / "one", progress_bar=False)
    assert first.state == "finished"
    from bertlab.training.export import export_run

    base = export_run(tmp_path / "one", tmp_path / "base", fp16=False)  # a checkpoint of its own, as shipped
    import dataclasses

    import torch

    from bertlab.storage.checkpoint import load_pretraining_model
    from bertlab.training.pretrain import initialize_from

    cfg = dataclasses.replace(_config(tmp_path, vocab_file, max_steps=4), vocab=None, init_from=str(base), dropout=0.0)
    parent, tok, _ = load_pretraining_model(base)

    fresh = BertForPreTraining(cfg.model_config(len(tok)))
    info = initialize_from(fresh, cfg.init_from)
    assert info["init_card"]["steps"] == 6
    for k, v in parent.state_dict().items():
        assert torch.equal(fresh.state_dict()[k], v), k
    stopped = run_pretraining(
        cfg, tmp_path / "two", progress_bar=False, stop_after_steps=1, command="bertlab pretrain A"
    )
    assert stopped.state == "cancelled"
    assert (tmp_path / "two" / "vocab.txt").read_text() == (base / "vocab.txt").read_text()
    resumed = run_pretraining(
        cfg, tmp_path / "two", resume=True, progress_bar=False, command="bertlab pretrain --resume"
    )
    assert resumed.state == "finished" and resumed.progress.step == 4
    card = json.loads((tmp_path / "two" / "model" / "model_card.json").read_text())
    assert card["command"] == "bertlab pretrain A"  # the command that started the run, not the resume
    assert card["init_from"] == str(base) and card["init_card"]["steps"] == 6
    assert card["total_steps"] == 10 and card["steps"] == 4
    assert card["total_tokens"] > card["tokens"] > 0
    config = json.loads((tmp_path / "two" / "model" / "config.json").read_text())
    assert config["hidden_dropout_prob"] == 0.1  # dropout 0 was for pretraining only

    out = export_run(tmp_path / "two", tmp_path / "shipped", history=["step 1: stopped and resumed"])
    readme = (out / "README.md").read_text()
    assert "continued pretraining from" in readme and "In total: 10 steps" in readme
    assert "Dropout while pretraining: 0.0 (config.json keeps 0.1" in readme
    assert "- step 1: stopped and resumed" in readme
    assert json.loads((out / "model_card.json").read_text()).get("init_from_replaced") is None
    shipped, _, info = load_pretraining_model(out)
    assert info["card"]["history"] == ["step 1: stopped and resumed"]
    assert next(iter(read_weights(out).values())).dtype == torch.float16
    with pytest.raises(InputError, match="no finished model"):
        export_run(tmp_path / "three", tmp_path / "x")

    other = dataclasses.replace(
        cfg, model_overrides={**cfg.model_overrides, "hidden_size": 16, "intermediate_size": 32}
    )
    with pytest.raises(InputError, match="does not fit"):
        run_pretraining(other, tmp_path / "three", progress_bar=False)
    with pytest.raises(InputError, match="not found"):
        run_pretraining(
            dataclasses.replace(cfg, init_from=str(tmp_path / "nowhere")), tmp_path / "four", progress_bar=False
        )
    # exported over the model it started from: the card must not read as if it started from itself
    over = export_run(tmp_path / "two", base)
    card = json.loads((over / "model_card.json").read_text())
    assert card["init_from"] == str(base) and card["init_from_replaced"] is True
    readme = (over / "README.md").read_text()
    assert f"from the earlier model in `{base}` (this model has since replaced it there)" in readme


def _prepare_in_lockstep(cfg, run_dir, env, start, written, results) -> None:
    """What a rank or a run does before training (tokenizer, data), with numpy's write of a cache
    file held until the other process has written too, or for 5 s when it is not coming (then it
    waits on the lock: the fix). Puts (vocabularies trained, splits made, instances) on `results`."""
    import numpy as np

    from bertlab.data.corpus import load_corpus
    from bertlab.tokenizer import BertTokenizer

    os.environ.update(env)
    real_savez, real_train, trained = np.savez, BertTokenizer.train, []

    def savez_then_wait(*args, **kwargs):
        real_savez(*args, **kwargs)
        try:
            written.wait(timeout=5)
        except threading.BrokenBarrierError:
            pass

    def train_and_count(*args, **kwargs):
        trained.append(1)
        return real_train(*args, **kwargs)

    np.savez, BertTokenizer.train = savez_then_wait, train_and_count
    start.wait(timeout=120)
    try:
        corpus = load_corpus(cfg.corpus, cfg.corpus_format)
        tokenizer = prepare_tokenizer(cfg, run_dir, corpus.documents)
        train_stores, heldout, stats = prepare_data(cfg, corpus, tokenizer)
        results.put((len(trained), sorted(stats), len(train_stores[0]), len(heldout)))
    except Exception as exc:
        results.put(f"{type(exc).__name__}: {exc}")


@pytest.mark.parametrize("who", ["two runs", "two ranks"])
def test_two_processes_build_one_data_cache_once(tmp_path, vocab_file, who):
    # (#24) two runs with the same data settings side by side (an ablation suite), or the two ranks
    # of a torchrun job before the trainer creates the process group: one builds each cache file
    # (and the ranks' shared vocabulary) while the other waits, then loads it
    cfg = _config(tmp_path, vocab_file, max_steps=1)
    if who == "two ranks":
        cfg = dataclasses.replace(cfg, vocab=None, vocab_size=200)
        runs = [(tmp_path / "run", {"RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": "2"}) for r in range(2)]
    else:
        runs = [(tmp_path / f"run{r}", {}) for r in range(2)]
    ctx = multiprocessing.get_context("spawn")
    start, written, results = ctx.Barrier(2), ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_prepare_in_lockstep, args=(cfg, *run, start, written, results)) for run in runs]
    for p in procs:
        p.start()
    got = [results.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert all(isinstance(g, tuple) for g in got), got
    made = sorted(split for g in got for split in g[1])  # by either process: the other loads it
    assert made == ["heldout", "train"], f"each split is made once: {got}"
    assert got[0][2:] == got[1][2:]  # the same instances
    if who == "two ranks":
        assert sum(g[0] for g in got) == 1, "the vocabulary is trained once"
    assert not [q.name for q in (tmp_path / "cache").iterdir() if q.name.endswith(".tmp")]


def _cli_env():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = "1"
    return env


def test_dry_run_through_cli(tmp_path, vocab_file):
    corpus = _write_corpus(tmp_path / "corpus.txt")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bertlab",
            "pretrain",
            "--config",
            str(REPO / "configs" / "tiny.yaml"),
            "--dry-run",
            "--run-dir",
            str(tmp_path / "run"),
            "--no-progress",
            f"corpus=[{corpus}]",
            f"vocab={vocab_file}",
            f"cache_dir={tmp_path / 'cache'}",
            "data.max_seq_length=32",
            "train.device=cpu",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=_cli_env(),
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1])["step"] == 1
    assert (tmp_path / "run" / "model" / "model.safetensors").is_file()
    # a second dry run into the folder, which now holds a run, is refused as a real run is (it wrote its
    # one step over a finished run)
    from bertlab.training.pretrain import settings_for_run
    from bertlab.training.pretrain_config import load_config_file

    with pytest.raises(InputError, match="already holds a run"):
        settings_for_run(load_config_file(None, ["train.max_steps=5"]), tmp_path / "run", resume=False, dry_run=True)
    with pytest.raises(InputError, match="leave out --resume"):
        settings_for_run(load_config_file(None, ["train.max_steps=5"]), tmp_path / "run", resume=True, dry_run=True)
    log = (tmp_path / "run" / "log.txt").read_text().splitlines()  # (#13) a CLI run keeps a log, as a job does
    assert "pretrain --config" in log[0] and any("checkpoint saved at step 1" in line for line in log)


def test_two_process_gloo_run(tmp_path, vocab_file):
    """The same code under torchrun: two CPU processes with the gloo backend."""
    corpus = _write_corpus(tmp_path / "corpus.txt")
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--master_port",
        str(29500 + os.getpid() % 1000),
        "-m",
        "bertlab",
        "pretrain",
        "--config",
        str(REPO / "configs" / "tiny.yaml"),
        "--run-dir",
        str(tmp_path / "run"),
        "--no-progress",
        f"corpus=[{corpus}]",
        f"vocab={vocab_file}",
        f"cache_dir={tmp_path / 'cache'}",
        "size=tiny",
        "model_overrides={hidden_size: 32, num_layers: 2, num_heads: 2, intermediate_size: 64}",
        "data.max_seq_length=32",
        "train.batch_size=8",
        "train.max_steps=4",
        "train.log_every=2",
        "train.eval_every=0",
        "train.device=cpu",  # gloo: two processes on one GPU would be NCCL's, which refuses a shared GPU
        "eval_instances=32",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=400, env=_cli_env(), cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    status = json.loads((tmp_path / "run" / "status.json").read_text())
    assert status["state"] == "finished" and status["world_size"] == 2
    train = [m for m in read_metrics(tmp_path / "run") if m["split"] == "train"]
    assert train and train[-1]["step"] == 4


# `bertlab` under torchrun as a test sees it: each rank keeps its final weights (rank 0 alone saves
# the model) and each micro-batch waits STEP_SLEEP_S, so a test can kill a node mid-run
_NODE_ENTRY = """
import os, sys, time
import torch
import bertlab.training.pretrain as pretrain
real_train, real_forward = pretrain.train, pretrain.PretrainTask.forward

def slow_forward(self, model, batch):
    time.sleep(float(os.environ.get("STEP_SLEEP_S", "0")))
    return real_forward(self, model, batch)

def train_and_keep_weights(task, model, *args, **kwargs):
    result = real_train(task, model, *args, **kwargs)
    torch.save(model.state_dict(), os.path.join(os.environ["WEIGHTS_OUT"], f"weights-rank{os.environ['RANK']}.pt"))
    return result

pretrain.train, pretrain.PretrainTask.forward = train_and_keep_weights, slow_forward
from bertlab.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_nodes(tmp_path, vocab_file, steps: int, resume: bool = False, step_sleep_s: float = 0.0):
    """Two torchrun agents on 127.0.0.1 running `node_commands`' lines (gloo, one process each, c10d
    rendezvous), as two machines sharing the run folder would; returns (processes, their output files)."""
    from bertlab.jobs.spec import JobSpec, node_commands

    corpus = _write_corpus(tmp_path / "corpus.txt")
    args = (
        "--config",
        str(REPO / "configs" / "tiny.yaml"),
        f"corpus=[{corpus}]",
        f"vocab={vocab_file}",
        f"cache_dir={tmp_path / 'cache'}",
        "size=tiny",
        "model_overrides={hidden_size: 32, num_layers: 2, num_heads: 2, intermediate_size: 64}",
        "data.max_seq_length=32",
        "train.batch_size=8",
        f"train.max_steps={steps}",
        "train.log_every=2",
        "train.eval_every=0",
        "train.save_every=4",
        "train.save_every_s=0",
        "eval_instances=32",
    )
    spec = JobSpec("pretrain", args, device="cpu")
    launcher = (sys.executable, "-m", "torch.distributed.run")
    lines = node_commands(spec, tmp_path / "run", 2, f"127.0.0.1:{_free_port()}", resume=resume, launcher=launcher)
    entry = tmp_path / "node_entry.py"
    entry.write_text(_NODE_ENTRY)
    (tmp_path / "weights").mkdir(exist_ok=True)
    env = _cli_env() | {"WEIGHTS_OUT": str(tmp_path / "weights"), "STEP_SLEEP_S": str(step_sleep_s)}
    procs, outputs = [], []
    for line in lines:
        argv = list(line.argv)
        at = argv.index("-m", len(launcher))  # `-m bertlab` -> the entry above, same arguments
        argv[at : at + 2] = [str(entry)]
        outputs.append(tmp_path / f"node{line.node}{'-resume' if resume else ''}.txt")
        with open(outputs[-1], "w") as out:
            procs.append(subprocess.Popen(argv, env=env, cwd=REPO, stdout=out, stderr=subprocess.STDOUT))
    return procs, outputs


def _wait_nodes(procs, outputs, timeout: float = 300) -> list[int]:
    try:
        return [p.wait(timeout=timeout) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def _assert_equal_weights_on_both_ranks(tmp_path):
    rank0 = torch.load(tmp_path / "weights" / "weights-rank0.pt", weights_only=True)
    rank1 = torch.load(tmp_path / "weights" / "weights-rank1.pt", weights_only=True)
    assert rank0.keys() == rank1.keys()
    for name in rank0:
        assert_close(rank0[name], rank1[name], rtol=0, atol=0, msg=name)


def test_two_nodes_on_one_machine_end_with_equal_weights(tmp_path, vocab_file):
    # (#24) `jobs submit --nodes 2`'s lines, run by two torchrun agents as if on two machines
    procs, outputs = _start_nodes(tmp_path, vocab_file, steps=4)
    codes = _wait_nodes(procs, outputs)
    assert codes == [0, 0], "\n".join(o.read_text()[-2000:] for o in outputs)
    status = json.loads((tmp_path / "run" / "status.json").read_text())
    assert status["state"] == "finished" and status["world_size"] == 2 and status["step"] == 4
    _assert_equal_weights_on_both_ranks(tmp_path)


def _child_pids(pid: int) -> list[int]:
    """The processes whose parent is `pid` (a torchrun agent's workers), read from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[1] == str(pid):
                found.append(int(entry.name))
    return found


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="finds the node's worker through /proc")
def test_a_killed_node_fails_the_job_plainly_and_resume_continues(tmp_path, vocab_file):
    # (#24) the second node's process is killed after the first checkpoint: the job reads failed
    # with a plain reason, and the same lines with --resume continue from the checkpoint
    from bertlab.jobs.runs import read_job

    procs, outputs = _start_nodes(tmp_path, vocab_file, steps=40, step_sleep_s=0.1)
    checkpoint = tmp_path / "run" / "checkpoint" / "trainer_state.pt"
    try:
        wait_until = time.time() + 240
        while not checkpoint.is_file() and time.time() < wait_until and all(p.poll() is None for p in procs):
            time.sleep(0.1)
        assert checkpoint.is_file(), "\n".join(o.read_text()[-2000:] for o in outputs)
        for pid in _child_pids(procs[1].pid):
            os.kill(pid, signal.SIGKILL)
    finally:
        codes = _wait_nodes(procs, outputs)
    assert codes[0] != 0 and codes[1] != 0
    job = read_job(tmp_path / "run")
    assert job.state == "failed" and 0 < job.step < 40
    assert "lost contact with another process" in job.error and "--resume" in job.error, job.error
    assert "bertlab pretrain: error: rank" in outputs[0].read_text()  # the CLI's one line, not a traceback

    procs, outputs = _start_nodes(tmp_path, vocab_file, steps=40, resume=True)
    codes = _wait_nodes(procs, outputs)
    assert codes == [0, 0], "\n".join(o.read_text()[-2000:] for o in outputs)
    assert all(re.search(r"resumed from step [1-9]", o.read_text()) for o in outputs)
    job = read_job(tmp_path / "run")
    assert job.state == "finished" and job.step == 40
    _assert_equal_weights_on_both_ranks(tmp_path)


DEFAULT = REPO / "checkpoints" / "bertlab-mini"


@pytest.mark.skipif(not (DEFAULT / "model.safetensors").is_file(), reason="the default model is not in this checkout")
def test_default_model_answers_in_cli():
    proc = subprocess.run(
        [sys.executable, "-m", "bertlab", "fill-mask", "The capital of France is [MASK].", "--json", "--top-k", "5"],
        capture_output=True,
        text=True,
        timeout=120,
        env=_cli_env(),
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    answers = json.loads(proc.stdout)
    assert len(answers) == 1 and answers[0]["text"] == "The capital of France is [MASK]."
    candidates = answers[0]["masks"][0]["candidates"]
    assert len(candidates) == 5 and all(0 <= a["score"] <= 1 for a in candidates)
    assert answers[0]["joint_text"].startswith("The capital of France is ")
    info = subprocess.run(
        [sys.executable, "-m", "bertlab", "info", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=_cli_env(),
        cwd=REPO,
    )
    data = json.loads(info.stdout)
    assert data["config"]["num_layers"] == 4 and data["has_nsp_head"]
    card = data["card"]
    assert card["metrics"]["mlm_acc"] > 0.30  # always guessing the most frequent token gets ~5%
    assert card["metrics"]["nsp_acc"] > 0.75
    # four stages: from scratch (configs/default-model.yaml), then continued three times (default-model-stage2.yaml,
    # -stage3.yaml on a CPU, -stage4.yaml on a GPU); the card names the last stage's command and the one before it
    assert card["total_tokens"] > 1.7e8 and card["init_from_replaced"] and "stage4" in card["command"]
    assert "stage3" in card["init_card"]["command"]
    assert {p["stage"] for p in card["learning_curve"]} == {1, 2, 3, 4} and card["learning_curve"][0]["step"] == 10
    assert len(card["learning_curve"]) >= 40 and card["unseen_english"]["overall"]["masked_tokens"] > 10_000
    assert (DEFAULT / "learning_history.json").is_file()


def test_a_continued_run_carries_the_earlier_stage_curve_and_history(tmp_path, vocab_file):
    """A run continued from an exported model (init_from) is exported with one learning curve and one
    learning history across both stages: the earlier model's points, then its own with steps,
    tokens and seconds counted on from the earlier totals; exporting it again over the model it
    started from gives the same story (what it carries was kept in its own run folder)."""
    import dataclasses

    from bertlab.training.export import export_run
    from bertlab.training.history import load_history

    first = _config(tmp_path, vocab_file, max_steps=12, eval_every=6, snapshots="true")
    assert run_pretraining(first, tmp_path / "one", progress_bar=False).state == "finished"
    stage1 = export_run(tmp_path / "one", tmp_path / "shipped")
    card1 = json.loads((stage1 / "model_card.json").read_text())
    h1 = load_history(stage1)
    second = dataclasses.replace(
        _config(tmp_path, vocab_file, max_steps=8, eval_every=4, snapshots="true"), vocab=None, init_from=str(stage1)
    )
    assert run_pretraining(second, tmp_path / "two", progress_bar=False).state == "finished"
    for _ in range(2):  # the second export replaces the model it started from
        out = export_run(tmp_path / "two", stage1)
        card = json.loads((out / "model_card.json").read_text())
        curve = card["learning_curve"]
        n1 = len(card1["learning_curve"])
        assert [p["stage"] for p in curve] == [1] * n1 + [2] * (len(curve) - n1) and len(curve) > n1
        assert [p["step"] for p in curve[:n1]] == [p["step"] for p in card1["learning_curve"]]
        assert curve[-1]["step"] == 12 + 8 and curve[-1]["tokens"] == card["total_tokens"]
        assert "learning_curve" not in card["init_card"] and card["init_card"]["deviations"]
        h = load_history(out)
        assert h.steps[: len(h1.steps)] == h1.steps and h.steps[-1] == 20
        assert h.snapshots[len(h1.steps)].step > 12 and h.snapshots[-1].tokens == card["total_tokens"]
        assert h.snapshots[0].fill_mask == h1.snapshots[0].fill_mask  # stage 1's answers, untouched
        assert h.snapshots[0].stage == 1 and h.snapshots[-1].stage == 2
        assert "That earlier stage departed from the paper's recipe in:" in (out / "README.md").read_text()


def test_heldout_corpus_scores_runs_on_other_data_on_the_same_documents(tmp_path, vocab_file):
    """A run on more (or less) data than the base corpus holds out the base corpus's documents, and
    never trains on them, so its held-out scores compare with the base runs'."""
    import dataclasses

    from bertlab.data.corpus import load_corpus
    from bertlab.training.pretrain import split_documents

    base = _config(tmp_path, vocab_file, max_steps=2)
    extra = tmp_path / "extra.txt"
    extra.write_text(
        "\n\n".join(
            "\n".join(f"Extra document {d} says thing number {i} about the weather." for i in range(6))
            for d in range(12)
        )
    )
    alone = split_documents(base, load_corpus(base.corpus))
    more = dataclasses.replace(base, corpus=(*base.corpus, str(extra)), heldout_corpus=base.corpus)
    both = split_documents(more, load_corpus(more.corpus))
    assert both.heldout == alone.heldout and both.fingerprint != alone.fingerprint
    assert len(both.train) == len(alone.train) + 12
    assert not {tuple(d) for d in both.heldout} & {tuple(d) for d in both.train}
    less = dataclasses.replace(base, corpus=(str(extra),), heldout_corpus=base.corpus)
    assert split_documents(less, load_corpus(less.corpus)).heldout == alone.heldout
    result = run_pretraining(more, tmp_path / "more", progress_bar=False)
    assert result.state == "finished"
    only_held = tmp_path / "held.txt"  # a corpus of nothing but the held-out documents
    only_held.write_text("\n\n".join("\n".join(d) for d in alone.heldout))
    nothing = dataclasses.replace(base, corpus=(str(only_held),), heldout_corpus=base.corpus)
    with pytest.raises(InputError, match="nothing is left to train on"):
        split_documents(nothing, load_corpus(nothing.corpus))
