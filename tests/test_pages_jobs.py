"""The Train and Jobs pages under `streamlit.testing.v1.AppTest`, on runs made in a tmp runs folder.

The Train page shows an estimate, refuses bad input with a plain message and queues a job; the
Jobs page lists runs with their curves, shows a failure's error, cancels a queued job, and its
Try it panel answers with a finished pretraining run (fill-mask) and a fine-tuned run (SST-2).
No background process is started: the queue's tick() is switched off for these tests.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402
from test_finetune_recipe import write_squad  # noqa: E402

from bertlab.app_pages import page_titled  # noqa: E402
from bertlab.jobs.registry import JobRegistry  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
TIMEOUT = 60  # seconds per run: the default 3 s is too short on 2 busy cores
TRAIN, JOBS = page_titled("Train").file, page_titled("Jobs").file


@pytest.fixture
def app_env(monkeypatch, tiny_checkpoint, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    monkeypatch.syspath_prepend(str(REPO))
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("BERTLAB_MODEL", str(tiny_checkpoint))
    monkeypatch.setenv("BERTLAB_RUNS", str(runs))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("BERTLAB_THREADS", "1")
    monkeypatch.setattr(JobRegistry, "tick", lambda self: [])  # queue only: no process starts in these tests
    return runs


def open_page(page: str) -> AppTest:
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=TIMEOUT)
    at.run()
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def plotly_charts(at: AppTest) -> list:
    return at.get("plotly_chart")


def fake_run(
    runs: Path,
    name: str,
    state: str,
    kind: str = "pretrain",
    steps: int = 20,
    error: str | None = None,
    model: Path | None = None,
    submitted: float | None = None,
) -> Path:
    """A run folder as the trainer leaves it (status, metrics), launched by the registry (job.json)."""
    run = runs / name
    run.mkdir()
    (run / "job.json").write_text(
        json.dumps(
            {
                "kind": kind,
                "args": ["--config", "configs/tiny.yaml"],
                "device": "cpu",
                "num_gpus": 1,
                "cwd": str(REPO),
                "command": f"bertlab {kind} --config configs/tiny.yaml",
                "submitted": submitted or time.time(),
                "phase": "ended",
                "attempts": 1,
            }
        )
    )
    lines = []
    for s in range(1, steps + 1):
        lines.append(
            {
                "split": "train",
                "step": s,
                "loss": 6 - s * 0.1,
                "lr": 1e-4 * min(1, s / 5),
                "mlm_acc": s / 100,
                "nsp_acc": 0.5 + s / 100,
                "tokens_per_s": 1500.0,
                "eta_s": steps - s,
            }
        )
        if s % 10 == 0:
            lines.append({"split": "eval", "step": s, "mlm_loss": 5.5 - s * 0.05, "mlm_acc": s / 90})
    (run / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in lines))
    (run / "status.json").write_text(
        json.dumps(
            {
                "state": state,
                "step": steps,
                "total_steps": steps,
                "progress": 1.0,
                "started": time.time() - 60,
                "ended": time.time(),
                "last_train": lines[-2] if steps >= 10 else lines[-1],
                "error": error,
            }
        )
    )
    (run / "log.txt").write_text("model: tiny\ncheckpoint saved at step 20 (final)\n")
    if model is not None:
        shutil.copytree(model, run / "model")
    return run


# --------------------------------------------------------------------------------------
# Train
# --------------------------------------------------------------------------------------
def test_train_page_shows_an_estimate(app_env):
    pytest.importorskip("gensim")  # the Train page's default corpus is the sample in gensim's wheel
    at = open_page(TRAIN)
    assert not at.error, [e.value for e in at.error]
    labels = {m.label: m.value for m in at.metric}
    assert set(labels) == {"Parameters", "Memory", "Time"}
    assert labels["Parameters"].endswith("M") and labels["Time"] != "?"
    assert any("estimate" in c.value.lower() and "real tokens a step" in c.value for c in at.caption)
    assert "Seconds a step from" in " ".join(m.value for m in at.markdown)
    assert not at.button(key="train_launch").disabled


def test_train_page_offers_the_successors_configs_and_says_what_each_trains(app_env):
    pytest.importorskip("gensim")
    at = open_page(TRAIN)
    options = at.selectbox(key="train_config").options
    assert {"configs/successors/albert.yaml", "configs/successors/electra.yaml"} <= set(options)
    assert any(c.value.startswith("Trains: BERT · masked LM + next sentence") for c in at.caption)
    at.selectbox(key="train_config").set_value("configs/successors/albert.yaml").run()
    assert not at.exception
    assert any(c.value.startswith("Trains: ALBERT · ") for c in at.caption)


def test_train_page_says_plainly_what_is_wrong(app_env, tmp_path):
    at = open_page(TRAIN)
    at.text_input(key="train_corpus_configs_tiny.yaml").set_value("/no/such/corpus.txt").run()
    assert not at.exception
    assert len(at.error) == 1 and "corpus /no/such/corpus.txt not found" in at.error[0].value
    assert at.button(key="train_launch").disabled
    empty = tmp_path / "empty.txt"  # there, but no text: the job would fail after queueing
    empty.write_text("")
    at.text_input(key="train_corpus_configs_tiny.yaml").set_value(str(empty)).run()
    assert not at.exception
    assert any("fewer than two documents" in e.value for e in at.error)
    assert at.button(key="train_launch").disabled


def test_train_page_finetune_form_checks_the_data_folder(app_env, tmp_path):
    at = open_page(TRAIN)
    at.segmented_control(key="train_kind").set_value("Fine-tune on a task").run()
    assert not at.exception
    # a small model opens on a learning rate it learns at (the paper's 5e-5 left a mini model near chance)
    (lr,) = [n for n in at.number_input if n.label == "Learning rate"]
    assert lr.value == 3e-4
    at.radio(key="train_mode").set_value("feature").run()
    (lr,) = [n for n in at.number_input if n.label == "Learning rate"]
    assert lr.value == 1e-3  # a frozen encoder's task model
    at.radio(key="train_mode").set_value("finetune").run()
    at.text_input(key="train_data_sst2").set_value(str(tmp_path / "missing")).run()
    assert "not found" in " ".join(e.value for e in at.error)
    data = tmp_path / "sst2"
    data.mkdir()
    at.text_input(key="train_data_sst2").set_value(str(data)).run()
    assert {m.label for m in at.metric} == {"Parameters", "Memory", "Time"}  # an empty folder: estimated, but
    assert "cannot be read to count its tokens" in " ".join(e.value for e in at.error)  # the job would fail
    assert at.button(key="train_launch").disabled
    for name in ("train.tsv", "dev.tsv"):
        (data / name).write_text("sentence\tlabel\n" + "a fine film\t1\na dull one\t0\n" * 20)
    at.number_input(key="train_steps_ft_sst2").set_value(7).run()
    assert not at.error, [e.value for e in at.error]
    assert not at.button(key="train_launch").disabled
    shown = " ".join(m.value for m in at.markdown)
    assert "train examples of sst2" in shown and "With padding (what the model computes on)" in shown
    assert not any("torch.compile" in c.value for c in at.caption)  # padded batches: 'auto' stays eager


def test_train_page_offers_the_papers_task_layers(app_env, tmp_path):
    """The fine-tuning form runs Table 7's feature choices, Table 5's + BiLSTM, an added layers' own learning
    rate, a seed and an epoch budget; each reaches the estimate and the queued job's arguments."""
    data = tmp_path / "sst2"
    data.mkdir()
    for name in ("train.tsv", "dev.tsv"):
        (data / name).write_text("sentence\tlabel\n" + "a fine film\t1\na dull one\t0\n" * 20)
    at = open_page(TRAIN)
    at.segmented_control(key="train_kind").set_value("Fine-tune on a task").run()
    at.text_input(key="train_data_sst2").set_value(str(data)).run()
    assert at.selectbox(key="train_features_finetune").value == "last"  # the paper's fine-tuning
    plain = {m.label: m.value for m in at.metric}["Parameters"]
    at.checkbox(key="train_bilstm_False").check().run()
    at.number_input(key="train_head_lr").set_value(1e-2).run()
    at.number_input(key="train_seed").set_value(2).run()
    at.radio(key="train_budget_ft_sst2").set_value("Epochs").run()
    at.number_input(key="train_epochs_ft_sst2").set_value(2.0).run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert {m.label: m.value for m in at.metric}["Parameters"] != plain  # the BiLSTM's weights are counted
    at.text_input(key="train_name").set_value("my tagger").run()
    shown = " ".join(c.value for c in at.code)  # the same job from a terminal, its name too
    assert "--name 'my tagger' " in shown and "--bilstm" in shown and "--seed 2" in shown
    at.button(key="train_launch").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    (job,) = JobRegistry(app_env).list()
    args = list(job.job["args"])
    assert args[args.index("--epochs") + 1] == "2" and "--max-steps" not in args
    assert "--bilstm" in args and args[args.index("--head-lr") + 1] == "0.01"
    assert args[args.index("--seed") + 1] == "2" and "--features" not in args
    # frozen features open on the paper's best choice; the added layers' rate is then the learning rate itself
    at.radio(key="train_mode").set_value("feature").run()
    assert at.selectbox(key="train_features_feature").value == "cat4"
    assert at.number_input(key="train_head_lr").disabled
    at.selectbox(key="train_features_feature").set_value("layer:0").run()
    at.button(key="train_launch").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    newest = max(JobRegistry(app_env).list(), key=lambda j: j.id)
    args = list(newest.job["args"])
    assert args[args.index("--features") + 1] == "layer:0" and "--head-lr" not in args
    # feature-based tagging always reads through a BiLSTM: shown checked, and not a choice
    at.selectbox(key="train_task").set_value("upos").run()
    assert not at.exception
    box = at.checkbox(key="train_bilstm_True")
    assert box.value and box.disabled


def test_train_page_squad_defaults_to_384_tokens(app_env, tmp_path):
    """Issue 12: SQuAD fine-tunes on 384-token windows by default, as run_squad.py (the page sent 128)."""
    at = open_page(TRAIN)
    at.segmented_control(key="train_kind").set_value("Fine-tune on a task").run()
    assert at.select_slider(key="train_seq_ft_sst2").value == 128
    at.selectbox(key="train_task").set_value("squad").run()
    assert not at.exception
    assert at.select_slider(key="train_seq_ft_squad").value == 384
    data = tmp_path / "squad"
    for name in ("train-v1.1.json", "dev-v1.1.json"):
        write_squad(data / name)
    at.text_input(key="train_data_squad").set_value(str(data)).run()
    at.button(key="train_launch").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    (job,) = JobRegistry(app_env).list()
    args = list(job.job["args"])
    assert args[args.index("--max-seq-length") + 1] == "384"
    # a second click on Launch would queue the same job again: the page says so and asks first
    at.run()
    assert any(job.id in w.value and "already queued" in w.value for w in at.warning)
    assert at.button(key="train_launch").disabled
    at.checkbox(key="train_again_1").check().run()
    at.button(key="train_launch").click().run()
    assert len(JobRegistry(app_env).list()) == 2
    at.run()  # one confirmation queued one copy: a third asks again
    assert at.button(key="train_launch").disabled and not at.checkbox(key="train_again_2").value


def test_train_page_squad_follows_the_models_pretrained_length(app_env, tmp_path, monkeypatch):
    """A model pretrained on 128-token sequences (its card says) opens SQuAD at 128 and says why; asking for
    384 says the inputs are cut to 128 (position vectors past it were never trained)."""
    model = tmp_path / "short"
    shutil.copytree(app_env, model)
    (model / "model_card.json").write_text(
        json.dumps({"data_config": {"max_seq_length": 64}, "phase2": {"max_seq_length": 128}})
    )
    monkeypatch.setenv("BERTLAB_MODEL", str(model))
    at = open_page(TRAIN)
    at.segmented_control(key="train_kind").set_value("Fine-tune on a task").run()
    at.selectbox(key="train_task").set_value("squad").run()
    assert not at.exception
    assert at.select_slider(key="train_seq_ft_squad_128").value == 128
    cut = "Inputs are cut to 128 tokens"
    assert any(cut in c.value for c in at.caption)
    at.select_slider(key="train_seq_ft_squad_128").set_value(384).run()
    assert any(cut in c.value for c in at.caption)
    at.select_slider(key="train_seq_ft_squad_128").set_value(64).run()
    assert not any(cut in c.value for c in at.caption)


def test_launch_from_the_train_page_queues_a_job(app_env):
    pytest.importorskip("gensim")  # the Train page's default corpus is the sample in gensim's wheel
    at = open_page(TRAIN)
    at.number_input(key="train_steps_configs_tiny.yaml").set_value(25).run()
    at.button(key="train_launch").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert any("is queued" in s.value for s in at.success)
    jobs = JobRegistry(app_env).list()
    assert len(jobs) == 1 and jobs[0].state == "queued" and jobs[0].kind == "pretrain"
    assert "train.max_steps=25" in jobs[0].job["args"]
    assert "train.snapshots=true" in jobs[0].job["args"]  # kept for the Watch it learn page by default
    assert at.session_state["jobs_focus"] == jobs[0].id
    # the Jobs page opens on the new job; Cancel works on a queued job
    at.switch_page(JOBS).run()
    assert not at.exception
    assert at.selectbox(key="jobs_pick").value == jobs[0].id
    at.button(key=f"cancel-{jobs[0].id}").click().run()
    assert JobRegistry(app_env).get(jobs[0].id).state == "cancelled"


# --------------------------------------------------------------------------------------
# Jobs
# --------------------------------------------------------------------------------------
def test_jobs_page_without_runs(app_env):
    at = open_page(JOBS)
    assert "No runs yet" in " ".join(i.value for i in at.info)
    assert f"Runs folder: `{app_env}` (from $BERTLAB_RUNS)" in at.caption[0].value


def test_jobs_page_says_where_the_runs_are(app_env, tiny_checkpoint):
    fake_run(app_env, "done-run", "finished", model=tiny_checkpoint)
    at = open_page(JOBS)
    assert any(f"Runs folder: `{app_env}`" in c.value for c in at.caption)


def test_finished_run_is_listed_with_its_curves_and_fill_mask(app_env, tiny_checkpoint):
    fake_run(app_env, "failed-run", "failed", error="RuntimeError: CUDA out of memory", submitted=time.time() - 100)
    fake_run(app_env, "done-run", "finished", model=tiny_checkpoint)
    at = open_page(JOBS)
    assert not at.error
    assert at.selectbox(key="jobs_pick").value == "done-run"  # newest first
    assert any("done-run" in s.value and "finished" in s.value for s in at.subheader)
    numbers = {m.label: m.value for m in at.metric}
    assert numbers["Step"] == "20 / 20" and numbers["Train loss"] == "4.000"
    assert numbers["Eval mlm acc"] == "22.2%" and numbers["Tokens/s"] == "1.5k"
    charts = plotly_charts(at)
    curves = json.loads(charts[0].proto.spec)
    names = {t["name"] for t in curves["data"]}
    assert {"train loss", "eval mlm loss", "train mlm acc", "eval mlm acc", "learning rate"} <= names
    # Try it: fill-mask with the run's own model
    assert any(s.value == "Try it" for s in at.subheader)
    assert len(charts) == 2  # curves + one [MASK] bar chart
    bars = json.loads(charts[1].proto.spec)["data"][0]
    assert len(bars["y"]) == 5
    at.text_input(key="try-mask-done-run").set_value("no mask here").run()
    assert not at.exception
    assert "[MASK]" in " ".join(w.value for w in at.warning)


def test_a_run_with_an_unreadable_status_file_says_so(app_env, tiny_checkpoint):
    # (#14) one bad file: the run still lists (finished: its final model is there) and says what is wrong
    run = fake_run(app_env, "odd-run", "finished", model=tiny_checkpoint)
    (run / "status.json").write_text("[1, 2]")
    fake_run(app_env, "fine-run", "finished", model=tiny_checkpoint, submitted=time.time() - 100)
    at = open_page(JOBS)
    assert not at.exception and at.selectbox(key="jobs_pick").value == "odd-run"
    assert any("status.json holds list, not an object" in w.value for w in at.warning)
    assert any("odd-run" in s.value and "finished" in s.value for s in at.subheader)


def test_failed_run_shows_its_error(app_env):
    fake_run(app_env, "failed-run", "failed", error="RuntimeError: CUDA out of memory")
    at = open_page(JOBS)
    errors = [e.value for e in at.error]
    assert len(errors) == 1 and "CUDA out of memory" in errors[0]
    assert not at.button(key="resume-failed-run").disabled
    assert at.button(key="cancel-failed-run").disabled


def test_try_it_on_a_sst2_run(app_env, sst2_run):
    run = app_env / "finetune-sst2-run"
    shutil.copytree(sst2_run, run)
    (run / "job.json").write_text(
        json.dumps(
            {
                "kind": "finetune",
                "args": [],
                "device": "cpu",
                "phase": "ended",
                "submitted": time.time(),
                "command": "bertlab finetune --task sst2",
            }
        )
    )
    at = open_page(JOBS)
    assert not at.error, [e.value for e in at.error]
    assert any("Task **sst2**" in c.value for c in at.caption)
    at.text_input(key="try-finetune-sst2-run-s").set_value("the big red bird sang").run()
    assert not at.exception
    prediction = " ".join(m.value for m in at.markdown if m.value.startswith("Prediction:"))
    assert prediction.startswith(("Prediction: **0 (negative)**", "Prediction: **1 (positive)**")), prediction
    bars = json.loads(plotly_charts(at)[-1].proto.spec)["data"][0]
    assert sorted(bars["y"]) == ["0 (negative)", "1 (positive)"] and abs(sum(bars["x"]) - 1) < 1e-4


@pytest.fixture
def shared_app(app_env, monkeypatch, tiny_checkpoint, tmp_path):
    """The app as if started with server.address 0.0.0.0, its data roots the repo and tmp_path/data."""
    from streamlit import config

    from pages.common.admin import server_token

    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.setenv("BERTLAB_DATA_ROOTS", os.pathsep.join(map(str, (REPO, data, tiny_checkpoint.parent))))
    monkeypatch.setenv("BERTLAB_ADMIN_TOKEN", "shared-app-test-token")  # (#24) the form needs it when shared
    server_token.clear()  # one token per server process: this test's "process" starts now
    before = config.get_option("server.address")
    config.set_option("server.address", "0.0.0.0")
    yield data
    config.set_option("server.address", before)
    server_token.clear()


def test_shared_train_page_refuses_paths_outside_the_data_roots(shared_app, tmp_path):
    # (#14) when shared, a file outside the project could be read into a model's vocab.txt
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("private words\n")
    at = open_page(TRAIN)
    at.text_input(key="bertlab_admin_token_field").input("shared-app-test-token").run()
    assert any("shared on the network" in c.value for c in at.caption)
    at.text_input(key="train_corpus_configs_tiny.yaml").set_value(str(outside)).run()
    assert not at.exception
    assert len(at.error) == 1 and "outside the data folders" in at.error[0].value
    assert at.button(key="train_launch").disabled
    inside = shared_app / "corpus.txt"
    inside.write_text("the cat sat on the mat.\n\nthe dog ran to the park.\n")  # two documents, as NSP needs
    at.text_input(key="train_corpus_configs_tiny.yaml").set_value(f"{inside}, {outside}").run()
    assert "outside the data folders" in " ".join(e.value for e in at.error)
    at.text_input(key="train_corpus_configs_tiny.yaml").set_value(str(inside)).run()
    assert not at.error, [e.value for e in at.error]
    assert not at.button(key="train_launch").disabled
    at.segmented_control(key="train_kind").set_value("Fine-tune on a task").run()
    at.text_input(key="train_data_sst2").set_value(str(tmp_path)).run()
    assert "outside the data folders" in " ".join(e.value for e in at.error)
    assert at.button(key="train_launch").disabled
    assert JobRegistry(Path(os.environ["BERTLAB_RUNS"])).list() == []


def test_local_train_page_keeps_any_path(app_env, tmp_path):
    at = open_page(TRAIN)
    assert not any("shared on the network" in c.value for c in at.caption)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat.\n\nthe dog ran to the park.\n")
    at.text_input(key="train_corpus_configs_tiny.yaml").set_value(str(corpus)).run()
    assert not at.error, [e.value for e in at.error]


def test_jobs_page_offers_to_resume_runs_whose_process_went_away(app_env):
    from conftest import dead_pid, fake_launched_job

    fake_launched_job(app_env, "cut-short", dead_pid())  # status says running, its process is gone
    at = open_page(JOBS)
    warning = next(w.value for w in at.warning if "stopped mid-run" in w.value)
    assert "1 run stopped mid-run" in warning and "cut-short" in warning
    next(b for b in at.button if b.label == "Resume all 1").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert JobRegistry(app_env).get("cut-short").state == "queued"
    assert not [w for w in at.warning if "stopped mid-run" in w.value]


def test_the_runs_table_shows_no_none_and_sizes_every_column(app_env):
    """A queued run's loss read "None" and a running run's ETA lost its last character: the table leaves a
    missing value empty, and each column is given a width that holds its longest value."""
    fake_run(app_env, "done-run", "finished")
    queued = fake_run(app_env, "queued-run", "queued", submitted=time.time() - 100)
    job = json.loads((queued / "job.json").read_text())
    (queued / "job.json").write_text(json.dumps({**job, "phase": "queued"}))
    (queued / "status.json").unlink()
    at = open_page(JOBS)
    table = at.dataframe[0].value
    assert list(table["run"]) == ["done-run", "queued-run"] and list(table["state"]) == ["finished", "queued"]
    assert list(table["loss"]) == ["4.000", ""]  # not None
    widths = {name: c.get("width") for name, c in json.loads(at.dataframe[0].proto.columns).items() if name in table}
    for name, px in widths.items():  # ~7 px a character of the app's table font, at least
        assert px >= 7 * max(len(name), *(len(str(v)) for v in table[name])), (name, px)
    assert widths["ETA"] >= 7 * len("12 h 05 min")  # the queued run's ETA, when it runs, fits too


def test_a_sst2_run_cancelled_before_its_first_evaluation_draws_its_train_accuracy(app_env, sst2_run):
    """User review: a fine-tuned SST-2 run cancelled before it was evaluated showed an 'Accuracy' title
    over a blank plot, though each of its train lines had its accuracy."""
    run = app_env / "finetune-sst2-cancelled"
    shutil.copytree(sst2_run, run)
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    train = [m for m in lines if m["split"] == "train"]  # the real trainer's lines, without the final eval
    (run / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in train))
    status = json.loads((run / "status.json").read_text())
    (run / "status.json").write_text(json.dumps({**status, "state": "cancelled"}))
    at = open_page(JOBS)
    assert not at.exception, [e.value for e in at.exception]
    curves = json.loads(plotly_charts(at)[0].proto.spec)
    names = [t["name"] for t in curves["data"] if t.get("xaxis") == "x2"]
    assert names == ["train accuracy", "chance (accuracy): 50%"]  # the chance level: named in the legend
    assert any(m.label.startswith("Train accuracy (chance") for m in at.metric)


def test_a_running_runs_eta_is_at_the_pace_its_tokens_per_s_says(app_env):
    """User review: a resumed run said 'ETA 37 s' at step 2,500 of 3,000 beside 'Tokens/s 957' (four
    minutes of steps); the row of numbers and the runs table now both say its recent pace's."""
    run = app_env / "resumed-run"
    run.mkdir()
    resumed = time.time() - 100
    lines = []
    for steps, started, s_per_step in (
        (range(20, 2341, 20), resumed - 3600 - 2340 * 0.05, 0.05),  # the first attempt ran alone
        (range(2360, 2501, 20), resumed, 0.43),  # resumed at step 2,340 beside another job
    ):
        first = steps[0] - 20
        lines += [
            {
                "split": "train",
                "step": s,
                "time": started + (s - first) * s_per_step,
                "loss": 0.4,
                "acc": 0.8,
                "tokens": s * 410,
                "tokens_per_s": 410 / s_per_step,
                "progress": s / 3000,
            }
            for s in steps
        ]
    (run / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in lines))
    status = {"state": "running", "step": 2500, "total_steps": 3000, "progress": 2500 / 3000, "eta_s": 37.0}
    (run / "status.json").write_text(json.dumps({**status, "started": resumed, "last_train": lines[-1]}))
    at = open_page(JOBS)
    assert not at.exception, [e.value for e in at.exception]
    numbers = {m.label: m.value for m in at.metric}
    assert numbers["Tokens/s"] == "953" and numbers["ETA"] == "3 min 35 s"  # 500 steps at 0.43 s
    assert list(at.dataframe[0].value["ETA"]) == ["3 min 35 s"]


def test_shared_ablations_page_refuses_a_corpus_outside_the_data_roots(shared_app, tmp_path):
    """The suite form's corpus field (like its data folder) is read to estimate, even without the admin
    token: on a shared app a path outside the data roots is refused before anything reads it."""
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "private.txt").write_text("private words\n\nmore private words\n")
    at = open_page(page_titled("Ablations").file)
    at.button_group[0].set_value("table8").run()
    next(t for t in at.text_input if t.label.startswith("Pretraining corpus")).set_value(f"default, {outside}")
    next(t for t in at.text_input if t.label.startswith("Task data folder")).set_value(str(shared_app))
    next(b for b in at.button if b.label == "Estimate").click().run()
    assert not at.exception, [e.value for e in at.exception]
    said = " ".join(m.value for m in [*at.error, *at.warning])
    assert f"{outside} is outside the data folders this shared app may read" in said
