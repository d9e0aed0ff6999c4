"""bertlab/jobs/spec.py: job specs checked the way their recipes will, commands, form fields, paths."""

from __future__ import annotations

import os

import pytest
from conftest import REPO

from bertlab.jobs.registry import JobRegistry
from bertlab.jobs.spec import JobError, JobSpec, build_command, finetune_args, node_commands, pretrain_args


def test_bad_specs_are_refused_with_a_plain_reason(runs, job_data):
    corpus, cache = job_data
    reg = JobRegistry(runs, gpus=0)
    with pytest.raises(JobError, match="corpus /nope.txt not found"):
        reg.submit(JobSpec("pretrain", pretrain_args("configs/tiny.yaml", corpus="/nope.txt")))
    with pytest.raises(JobError, match="config file configs/none.yaml not found"):
        reg.submit(JobSpec("pretrain", ("--config", "configs/none.yaml")))
    with pytest.raises(JobError, match="no CUDA GPU"):
        reg.submit(JobSpec("pretrain", ("--config", "configs/tiny.yaml"), device="cuda"))
    with pytest.raises(JobError, match="leave out --run-dir"):
        reg.submit(JobSpec("pretrain", ("--config", "configs/tiny.yaml", "--run-dir", "x")))
    with pytest.raises(JobError, match="unknown model size"):
        reg.submit(JobSpec("pretrain", ("--config", "configs/tiny.yaml", "size=huge")))
    with pytest.raises(JobError, match="unknown job kind"):
        reg.submit(JobSpec("quantize", ()))  # quantizing is a command, not a job
    with pytest.raises(JobError, match="data /nope not found"):
        reg.submit(JobSpec("finetune", finetune_args("sst2", "/nope", None)))
    assert not runs.exists() or not any(runs.iterdir())  # nothing was queued
    # the corpora read by name (the shipped model's stage-3 config names two) are not paths to look for
    from bertlab.jobs.spec import parse_recipe_args, pretrain_config

    ns = parse_recipe_args("pretrain", pretrain_args("configs/tiny.yaml", corpus="default, sotu, wiki_vital"))
    assert list(pretrain_config(ns, REPO).corpus) == ["default", "sotu", "wiki_vital"]


def test_multi_gpu_command_uses_torchrun():
    spec = JobSpec("pretrain", ("--config", "configs/base.yaml", "train.max_steps=10"), device="cuda", num_gpus=4)
    cmd = build_command(spec, "/runs/x", resume=True, python="/venv/bin/python")
    launcher = cmd[: cmd.index("--standalone")]
    assert launcher in (["/venv/bin/torchrun"], ["/venv/bin/python", "-m", "torch.distributed.run"])
    assert cmd[cmd.index("--standalone") : cmd.index("pretrain") + 1] == [
        "--standalone",
        "--nproc_per_node",
        "4",
        "-m",
        "bertlab",
        "pretrain",
    ]
    assert cmd[-5:] == ["train.device=cuda", "--run-dir", "/runs/x", "--resume", "--no-progress"]
    single = build_command(JobSpec("finetune", ("--task", "sst2"), device="cpu"), "/r", python="py")
    assert single == [
        "py",
        "-m",
        "bertlab",
        "finetune",
        "--task",
        "sst2",
        "--device",
        "cpu",
        "--run-dir",
        "/r",
        "--no-progress",
    ]


def test_node_commands_are_one_torchrun_line_per_machine():
    # (#24) c10d rendezvous at the first machine: the same line on every machine, the run folder's
    # name as the rendezvous id, the processes per machine from num_gpus
    spec = JobSpec("finetune", ("--task", "sst2", "--data", "/d"), device="cuda", num_gpus=4)
    lines = node_commands(spec, "/shared/runs/sst2-1", 3, "10.0.0.1:29500")
    assert [c.node for c in lines] == [0, 1, 2] and len({c.argv for c in lines}) == 1
    assert lines[0].line == (
        "torchrun --nnodes 3 --nproc-per-node 4 --rdzv-backend c10d --rdzv-endpoint 10.0.0.1:29500 "
        "--rdzv-id sst2-1 -m bertlab finetune --task sst2 --data /d --device cuda --run-dir /shared/runs/sst2-1 "
        "--no-progress"
    )
    resumed = node_commands(JobSpec("pretrain", ("a b",)), "/r", 2, "[::1]:7", resume=True, launcher=("py", "-m", "x"))
    assert resumed[1].argv[:3] == ("py", "-m", "x") and "[::1]:7" in resumed[1].argv
    assert resumed[1].argv[-3:] == ("/r", "--resume", "--no-progress") and "'a b'" in resumed[1].line
    for nodes, master, says in ((1, "h:1", "at least 2"), (2, "h", "HOST:PORT"), (2, "h:0", "HOST:PORT")):
        with pytest.raises(JobError, match=says):
            node_commands(spec, "/r", nodes, master)


def test_registry_node_commands_check_the_job_and_start_nothing(runs):
    reg = JobRegistry(runs)
    spec = JobSpec("pretrain", ("--config", "configs/tiny.yaml", "train.max_steps=5"), name="multi")
    run_dir, lines = reg.node_commands(spec, 2, "10.0.0.1:29500", cwd=REPO)
    assert run_dir.parent == runs.resolve() and run_dir.name.startswith("multi-") and not run_dir.exists()
    assert lines[0].argv[lines[0].argv.index("--run-dir") + 1] == str(run_dir)
    assert reg.list() == []  # nothing queued
    with pytest.raises(JobError, match="not found"):
        reg.node_commands(JobSpec("pretrain", ("--config", "nope.yaml")), 2, "h:1", cwd=REPO)


def test_form_fields_become_recipe_arguments():
    args = pretrain_args(
        "configs/tiny.yaml",
        size="mini",
        corpus="default, /data/a.txt",
        max_time_s=600,
        learning_rate=1e-4,
        batch_size=16,
        max_seq_length=64,
    )
    assert args[:2] == ("--config", "configs/tiny.yaml")
    assert "corpus=[default, /data/a.txt]" in args
    assert {"train.max_steps=0", "train.max_time_s=600.0", "train.max_tokens=0", "train.batch_size=16"} <= set(args)
    long = pretrain_args("configs/tiny.yaml", max_steps=10, max_seq_length=512, masked_lm_prob=0.15, snapshots=True)
    assert {"data.max_predictions_per_seq=77", "data.masked_lm_prob=0.15", "train.snapshots=true"} <= set(long)
    assert "data.max_predictions_per_seq=26" in pretrain_args(None, max_steps=1, max_seq_length=128, masked_lm_prob=0.2)
    with pytest.raises(JobError, match="masked share"):
        pretrain_args(None, max_steps=1, masked_lm_prob=1.5)
    ft = finetune_args("mrpc", "/d", "/m", mode="feature", max_steps=100, learning_rate=2e-5)
    assert ft == (
        "--task",
        "mrpc",
        "--data",
        "/d",
        "--mode",
        "feature",
        "--model",
        "/m",
        "--max-steps",
        "100",
        "--lr",
        "2e-05",
    )
    with pytest.raises(JobError, match="unknown task"):
        finetune_args("imdb", "/d")
    paper = finetune_args("upos", "/d", epochs=6, features="layer:-2", bilstm=True, head_lr=1e-2, seed=3)
    assert paper[paper.index("--epochs") + 1] == "6" and paper[paper.index("--features") + 1] == "layer:-2"
    assert "--bilstm" in paper and paper[paper.index("--head-lr") + 1] == "0.01"
    assert paper[paper.index("--seed") + 1] == "3"
    assert "--epochs" not in finetune_args("upos", "/d", max_steps=5, epochs=6)  # the first budget given wins
    with pytest.raises(JobError, match="features must be"):
        finetune_args("upos", "/d", features="layer:two")
    with pytest.raises(JobError, match="cannot be negative"):
        finetune_args("upos", "/d", seed=-1)


def test_check_path_allowed_keeps_a_shared_app_inside_the_data_roots(tmp_path, monkeypatch):
    # (#14) a shared app's Train page handed any server path to training
    from bertlab.jobs.spec import check_path_allowed, data_roots, is_loopback_address

    root = tmp_path / "data"
    (root / "books").mkdir(parents=True)
    (tmp_path / "secret.txt").write_text("x")
    (root / "link").symlink_to(tmp_path / "secret.txt")
    check_path_allowed(str(root / "books"), [root])
    check_path_allowed("books", [root], cwd=root)
    for outside in (
        str(tmp_path / "secret.txt"),
        str(root / ".." / "secret.txt"),
        "../secret.txt",
        "/etc/passwd",
        str(root / "link"),
    ):
        with pytest.raises(JobError, match="outside the data folders"):
            check_path_allowed(outside, [root], cwd=root)
    monkeypatch.setenv("BERTLAB_DATA_ROOTS", os.pathsep.join([str(root), str(tmp_path / "more")]))
    assert data_roots() == [root.resolve(), (tmp_path / "more").resolve()]
    monkeypatch.delenv("BERTLAB_DATA_ROOTS")
    assert data_roots() == [REPO.resolve(), (REPO.parent / "shared" / "data").resolve()]
    assert all(is_loopback_address(a) for a in ("127.0.0.1", "127.0.1.1", "::1", "[::1]", "localhost"))
    assert not any(is_loopback_address(a) for a in ("", None, "0.0.0.0", "::", "192.168.1.5", "example.org"))
