"""bertlab.cli: fill-mask / nsp / info in text and --json, and one-line errors with a non-zero
exit status (never a traceback); the subcommand registry (cheap start-up, help for every
argument). Most cases call `main` in-process; a few run `python -m bertlab` or `python -c`."""

import argparse
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bertlab.cli import BUILTIN, COMMANDS, build_parser, main

REPO = Path(__file__).resolve().parent.parent


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _assert_one_line_error(code: int, out: str, err: str, *needles: str) -> None:
    assert code != 0
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err and lines[0].startswith("bertlab ")
    for needle in needles:
        assert needle in lines[0], lines[0]


# --- fill-mask ---------------------------------------------------------------------------------
def _assert_fill_mask_json(item: dict, text: str, masks: int, top_k: int) -> None:
    """The documented --json shape of one text: the Python API's names."""
    assert set(item) == {"text", "masks", "joint_text", "truncated", "num_masks_dropped"}
    assert item["text"] == text and item["truncated"] is False and item["num_masks_dropped"] == 0
    assert "[MASK]" not in item["joint_text"]
    assert len(item["masks"]) == masks
    for mask in item["masks"]:
        assert set(mask) == {"candidates"} and len(mask["candidates"]) == top_k
        assert all(set(c) == {"word", "token", "score"} for c in mask["candidates"])
        scores = [c["score"] for c in mask["candidates"]]
        assert scores == sorted(scores, reverse=True) and all(0 <= s <= 1 for s in scores)


def test_fill_mask_json_one_text_is_a_list_of_one(capsys, tiny_checkpoint):
    text = "the [MASK] sat on the [MASK]."
    code, out, err = _run(
        capsys, "fill-mask", "--model", str(tiny_checkpoint), "--device", "cpu", text, "--top-k", "3", "--json"
    )
    assert code == 0, err
    data = json.loads(out)
    assert isinstance(data, list) and len(data) == 1
    _assert_fill_mask_json(data[0], text, masks=2, top_k=3)


def test_fill_mask_json_several_texts_has_the_same_shape(capsys, tiny_checkpoint):
    texts = ["the [MASK] sat.", "a [MASK] ran to the [MASK]."]
    code, out, _ = _run(capsys, "fill-mask", "--model", str(tiny_checkpoint), "--json", "--top-k", "2", *texts)
    assert code == 0
    data = json.loads(out)
    assert len(data) == 2
    for item, text, masks in zip(data, texts, (1, 2), strict=True):
        _assert_fill_mask_json(item, text, masks=masks, top_k=2)


def test_fill_mask_text_output(capsys, tiny_checkpoint):
    code, out, _ = _run(
        capsys, "fill-mask", "--model", str(tiny_checkpoint), "The [MASK] sat on the [MASK].", "--top-k", "2"
    )
    assert code == 0
    assert "[MASK] #1:" in out and "[MASK] #2:" in out and "joint fill: The " in out
    assert out.count("%") == 4


def test_fill_mask_text_output_escapes_the_users_control_characters(capsys, tiny_checkpoint):
    texts = ["the \x1b[2J[MASK] sat on the [MASK].", "a \u202e[MASK] ran."]
    code, out, _ = _run(capsys, "fill-mask", "--model", str(tiny_checkpoint), "--top-k", "1", *texts)
    assert code == 0
    assert "\x1b" not in out and "\u202e" not in out
    assert "the \\x1b[2J[MASK] sat on the [MASK]." in out and "a \\u202e[MASK] ran." in out  # the text lines
    assert "joint fill: the \\x1b[2J" in out


def test_fill_mask_reports_truncation(capsys, tiny_checkpoint):
    text = "the [MASK] sat. " + "the dog ran to the park. " * 20
    code, out, _ = _run(capsys, "fill-mask", "--model", str(tiny_checkpoint), text)
    assert code == 0 and "input truncated" in out and "cut-off part" not in out


def test_fill_mask_says_how_many_masks_were_cut_off(capsys, tiny_checkpoint):
    text = "a [MASK] " + "the dog ran to the park. " * 20 + "the [MASK] sat."
    code, out, _ = _run(capsys, "fill-mask", "--model", str(tiny_checkpoint), text)
    assert code == 0 and "1 [MASK] in the cut-off part not answered" in out
    assert "[MASK] #1:" in out and "[MASK] #2:" not in out
    code, out, _ = _run(capsys, "fill-mask", "--model", str(tiny_checkpoint), "--json", text, text + " [MASK]")
    data = json.loads(out)
    assert [(d["truncated"], d["num_masks_dropped"], len(d["masks"])) for d in data] == [(True, 1, 1), (True, 2, 1)]


# --- nsp and info ---------------------------------------------------------------------------------
def test_nsp_json_and_text(capsys, tiny_checkpoint):
    code, out, _ = _run(capsys, "nsp", "--model", str(tiny_checkpoint), "--json", "the cat sat.", "it was big.")
    assert code == 0
    data = json.loads(out)
    assert set(data) == {"is_next_prob", "is_next", "truncated"}
    assert 0 <= data["is_next_prob"] <= 1 and data["is_next"] == (data["is_next_prob"] >= 0.5)
    code, out, _ = _run(capsys, "nsp", "--model", str(tiny_checkpoint), "the cat sat.", "it was big.")
    assert code == 0 and "P(IsNext)" in out


def test_nsp_text_output_says_the_input_was_cut(capsys, tiny_checkpoint):
    long_a = "the dog ran to the park. " * 20
    code, out, _ = _run(capsys, "nsp", "--model", str(tiny_checkpoint), long_a, "it was big.")
    assert code == 0
    note, answer = out.splitlines()
    assert note.startswith("(input truncated: ") and note.endswith(" tokens cut)") and answer.startswith("P(IsNext)")
    code, out, _ = _run(capsys, "nsp", "--model", str(tiny_checkpoint), "the cat sat.", "it was big.")
    assert code == 0 and "truncated" not in out


def test_info_of_a_fine_tuned_model_says_what_head_it_has(capsys, tmp_path, tokenizer):
    import torch
    from conftest import tiny_config

    from bertlab.finetune.models import HeadConfig, build_task_model
    from bertlab.finetune.predict import TaskSetup, save_finetuned

    torch.manual_seed(0)
    head = HeadConfig("single", 2)
    model = build_task_model(tiny_config(len(tokenizer)), head)
    setup = TaskSetup("sst2", "single", ("0", "1"), head, max_seq_length=32)
    save_finetuned(tmp_path / "ft", model, tokenizer, setup, {"task": "sst2", "metrics": {"accuracy": 0.5}})
    code, out, err = _run(capsys, "info", "--model", str(tmp_path / "ft"), "--device", "cpu")
    assert code == 0, err
    rows = dict(line.split(maxsplit=1) for line in out.splitlines())
    assert rows["size"].startswith("L=2 H=32 A=4") and rows["parameters"] == f"{model.num_parameters():,}"
    assert rows["head"] == "fine-tuned for sst2 (single); labels 0, 1; no masked-LM head"
    assert rows["accuracy"] == "0.5" and "uncased" in rows["vocabulary"]
    code, out, _ = _run(capsys, "info", "--model", str(tmp_path / "ft"), "--json")
    data = json.loads(out)
    assert code == 0 and data["finetune"]["task"] == "sst2" and data["finetune"]["labels"] == ["0", "1"]
    assert data["has_nsp_head"] is False and data["vocab_size"] == len(tokenizer)


def test_info_json_and_text(capsys, tiny_checkpoint, tokenizer):
    code, out, _ = _run(capsys, "info", "--model", str(tiny_checkpoint), "--json")
    assert code == 0
    data = json.loads(out)
    assert data["config"]["num_layers"] == 2 and data["config"]["hidden_size"] == 32
    assert data["vocab_size"] == len(tokenizer) and data["lowercase"] is True
    assert data["has_nsp_head"] is True and data["parameters"] > 0
    assert data["path"] == str(tiny_checkpoint) and data["finetune"] is None
    code, out, _ = _run(capsys, "info", "--model", str(tiny_checkpoint))
    assert code == 0 and "L=2 H=32 A=4" in out and "uncased" in out
    assert "masked LM, pretrained (bertlab fill-mask, bertlab nsp)" in out


def test_info_shows_where_runs_go(capsys, tiny_checkpoint, tmp_path, monkeypatch):
    monkeypatch.setenv("BERTLAB_RUNS", str(tmp_path / "my-runs"))
    code, out, _ = _run(capsys, "info", "--model", str(tiny_checkpoint), "--json")
    assert code == 0 and json.loads(out)["runs_dir"] == str(tmp_path / "my-runs")
    code, out, _ = _run(capsys, "info", "--model", str(tiny_checkpoint))
    label, value = out.splitlines()[-1].split(maxsplit=1)
    assert code == 0 and (label, value) == ("runs", f"{tmp_path / 'my-runs'}  (from $BERTLAB_RUNS)")
    monkeypatch.delenv("BERTLAB_RUNS")
    code, out, _ = _run(capsys, "info", "--model", str(tiny_checkpoint), "--json")
    assert json.loads(out)["runs_dir"] == str(REPO / "runs")  # the repository's, wherever the command starts


def test_info_rows_line_up_with_long_metric_names(capsys, tiny_checkpoint, tmp_path):
    model = tmp_path / "with-card"
    shutil.copytree(tiny_checkpoint, model)
    (model / "model_card.json").write_text(json.dumps({"metrics": {"mlm_acc": 0.19, "mlm_perplexity": 236.04}}))
    code, out, _ = _run(capsys, "info", "--model", str(model))
    assert code == 0
    lines = out.splitlines()
    assert [line.split()[0] for line in lines][-3:] == ["mlm_acc", "mlm_perplexity", "runs"]
    value_columns = {len(line) - len(line.split(maxsplit=1)[1]) for line in lines}
    assert len(value_columns) == 1, out  # every value starts in the same column


# --- errors ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "empty"),
        ("the cat sat.", "no [MASK]"),
        ("the cat sat on the mat . " * 20 + "the [MASK] ran.", "cut off"),
    ],
)
def test_fill_mask_bad_text(capsys, tiny_checkpoint, text, needle):
    code, out, err = _run(capsys, "fill-mask", "--model", str(tiny_checkpoint), text)
    _assert_one_line_error(code, out, err, "fill-mask", needle)


def test_invalid_utf8_on_the_command_line_is_one_line_and_exit_2(capsys, tiny_checkpoint, tmp_path):
    # Python hands an undecodable byte of argv over as a lone surrogate (U+DC80 + byte)
    code, out, err = _run(capsys, "fill-mask", "--model", str(tiny_checkpoint), "\udcff [MASK]")
    assert code == 2
    _assert_one_line_error(code, out, err, "fill-mask", "text is not valid UTF-8", "byte 0xff at character 0")
    code, out, err = _run(capsys, "fill-mask", "--model", str(tiny_checkpoint), "a [MASK]", "b\udce9 [MASK]")
    _assert_one_line_error(code, out, err, "text 2 is not valid UTF-8", "byte 0xe9 at character 1")
    code, out, err = _run(capsys, "nsp", "--model", str(tiny_checkpoint), "fine", "\ud800")
    _assert_one_line_error(code, out, err, "sentence B is not valid UTF-8")
    # as a shell passes it: the raw bytes, in a real process
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    for argv in ([b"fill-mask", b"\xff [MASK]"], [b"nsp", b"\xff", b"b"]):
        done = subprocess.run(
            [sys.executable, "-m", "bertlab", *argv, b"--model", str(tiny_checkpoint).encode()],
            capture_output=True,
            env=env,
            cwd=tmp_path,
            timeout=120,
        )
        err = done.stderr.decode()
        assert done.returncode == 2 and done.stdout == b"" and len(err.strip().splitlines()) == 1, err
        assert "is not valid UTF-8 (byte 0xff at character 0)" in err and "Traceback" not in err


def _bad_checkpoint(tiny_checkpoint: Path, folder: Path, fault: str) -> Path:
    import torch

    d = Path(shutil.copytree(tiny_checkpoint, folder))
    if fault == "vocab_size 10**12":
        config = json.loads((d / "config.json").read_text())
        (d / "config.json").write_text(json.dumps(config | {"vocab_size": 10**12}))
    elif fault == "non-UTF-8 vocab.txt":
        with open(d / "vocab.txt", "ab") as f:
            f.write(b"caf\xe9\n")
        (d / "tokenizer.json").unlink(missing_ok=True)
    elif fault == "truncated weights":
        data = (d / "model.safetensors").read_bytes()
        (d / "model.safetensors").write_bytes(data[: len(data) // 2])
    elif fault == "config.json cut short":
        (d / "config.json").write_text((d / "config.json").read_text()[:30])
    elif fault == "pickle that runs code":
        (d / "model.safetensors").unlink()
        torch.save({"w": torch.zeros(2), "call": os.system}, d / "pytorch_model.bin")
    return d


@pytest.mark.parametrize(
    "fault",
    ["vocab_size 10**12", "non-UTF-8 vocab.txt", "truncated weights", "config.json cut short", "pickle that runs code"],
)
def test_a_bad_checkpoint_is_one_line_and_exit_2(capsys, tiny_checkpoint, tmp_path, fault):
    """(#14) each bad checkpoint file: one line on stderr naming the file, exit status 2."""
    d = _bad_checkpoint(tiny_checkpoint, tmp_path / "bad", fault)
    code, out, err = _run(capsys, "fill-mask", "--model", str(d), "--device", "cpu", "the [MASK].")
    assert code == 2
    _assert_one_line_error(code, out, err, "fill-mask: error:", str(d))


def test_unknown_model_path(capsys, tmp_path):
    code, out, err = _run(capsys, "fill-mask", "--model", str(tmp_path / "nope"), "the [MASK].")
    _assert_one_line_error(code, out, err, "no such checkpoint folder", str(tmp_path / "nope"))
    code, out, err = _run(capsys, "info", "--model", str(tmp_path))
    _assert_one_line_error(code, out, err, "config.json")


def test_bad_options(capsys, tiny_checkpoint):
    code, out, err = _run(capsys, "fill-mask", "--model", str(tiny_checkpoint), "--top-k", "0", "the [MASK].")
    _assert_one_line_error(code, out, err, "top_k")
    code, out, err = _run(capsys, "nsp", "--model", str(tiny_checkpoint), "--device", "gpu", "a", "b")
    _assert_one_line_error(code, out, err, "device")


def test_nsp_without_head(capsys, tmp_path, tokenizer):
    from conftest import tiny_config

    from bertlab.model import BertForPreTraining
    from bertlab.storage.checkpoint import save_checkpoint

    d = save_checkpoint(
        tmp_path / "no-nsp", BertForPreTraining(tiny_config(len(tokenizer), use_nsp_head=False)), tokenizer
    )
    code, out, err = _run(capsys, "nsp", "--model", str(d), "a cat", "a dog")
    _assert_one_line_error(code, out, err, "next-sentence")


# --- a real process ------------------------------------------------------------------------------
def test_python_m_bertlab_subprocess(tiny_checkpoint, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    ok = subprocess.run(
        [
            sys.executable,
            "-m",
            "bertlab",
            "fill-mask",
            "--model",
            str(tiny_checkpoint),
            "the cat [MASK].",
            "--top-k",
            "3",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    data = json.loads(ok.stdout)
    assert len(data) == 1 and len(data[0]["masks"][0]["candidates"]) == 3
    bad = subprocess.run(
        [sys.executable, "-m", "bertlab", "fill-mask", "--model", str(tmp_path / "missing"), "the cat [MASK]."],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert bad.returncode == 2 and bad.stdout == ""
    assert "Traceback" not in bad.stderr
    assert [line for line in bad.stderr.splitlines() if line.startswith("bertlab fill-mask: error:")]


def test_a_reader_that_leaves_early_is_no_error(tmp_path):
    """`bertlab jobs list | head -1`: a closed pipe is not reported as an error or a traceback."""
    runs = tmp_path / "runs"
    for n in range(3):
        (runs / f"run-{n}").mkdir(parents=True)
        (runs / f"run-{n}" / "status.json").write_text('{"state": "failed", "step": 1}')
    env = {**os.environ, "PYTHONPATH": str(REPO), "BERTLAB_RUNS": str(runs)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "bertlab", "jobs", "list"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    proc.stdout.close()  # the reader is gone before the command writes
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) in (0, 141)
    assert "Broken pipe" not in err and "Traceback" not in err and "Exception ignored" not in err, err


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    from bertlab import __version__

    assert capsys.readouterr().out.strip() == f"bertlab {__version__}"


def test_the_set_up_installs_the_bertlab_command():
    import shutil
    from pathlib import Path

    for script in ("scripts/app.sh", "scripts/test.sh"):
        assert "pip install -q --no-deps -e ." in (Path(__file__).resolve().parent.parent / script).read_text()
    if os.environ.get("CI"):  # CI runs scripts/test.sh, which installed it before pytest started
        assert shutil.which("bertlab"), "bertlab is not on the PATH after scripts/test.sh"


def test_the_set_up_gives_a_fresh_environment_the_bertlab_command(tmp_path):
    """(#13) The set-up's `pip install --no-deps -e .` in a fresh virtual environment puts a working
    `bertlab` on its PATH. The environment sees this interpreter's packages (a .pth file), so
    nothing is downloaded; build isolation is off for the same reason."""
    pytest.importorskip("setuptools")
    import site

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    (Path(purelib) / "outer.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {
        "PIP_NO_INDEX": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "-e", str(REPO)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"
    done = subprocess.run(["bertlab", "--help"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    assert shutil.which("bertlab", path=env["PATH"]) == str(venv / "bin" / "bertlab")
    assert "fill-mask" in done.stdout and "jobs" in done.stdout


@pytest.mark.parametrize(("pytest_status", "expected"), [(5, 0), (0, 0), (1, 1)])
def test_test_sh_says_when_no_test_matches_a_marker(tmp_path, pytest_status, expected):
    """`bash scripts/test.sh -m slow` (the README's) exits 0 and says so when no test is marked slow
    (pytest's status 5, "no tests collected"); a real failure still fails. python3 and chromium are
    stand-ins here, so nothing is installed."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(
        f'#!/bin/sh\nif [ "$2" = pytest ]; then echo "pytest $*"; exit {pytest_status}; fi\nexit 0\n'
    )
    (bin_dir / "chromium").write_text("#!/bin/sh\nexit 0\n")
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(
        ["bash", str(REPO / "scripts" / "test.sh"), "-m", "slow"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == expected, done.stdout + done.stderr
    assert "-m slow" in done.stdout
    assert ("no test matched: -m slow" in done.stdout) == (pytest_status == 5)


# --- the subcommand registry ----------------------------------------------------------------------
def test_help_and_jobs_list_do_not_import_torch(tmp_path):
    """`bertlab --help` and `bertlab jobs list` build only what they run: no torch (seconds of start-up)."""
    script = textwrap.dedent("""
        import sys
        from bertlab.cli import build_parser, main
        build_parser(["--help"])
        build_parser(["no-such-command"])
        try:
            main(["--help"])
        except SystemExit as exc:
            assert exc.code == 0, exc.code
        assert main(["jobs", "list"]) == 0
        assert main(["jobs", "list", "--json"]) == 0
        loaded = sorted(m for m in sys.modules if m == "torch" or m.startswith("torch."))
        assert not loaded, loaded[:5]
    """)
    (tmp_path / "runs").mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO), "BERTLAB_RUNS": str(tmp_path / "runs")}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "fill-mask" in done.stdout and "jobs" in done.stdout and "no jobs in" in done.stdout


def test_every_registered_command_imports_its_add_args_and_run():
    for name, (help_text, load) in COMMANDS.items():
        add_args, run = load()
        assert help_text and callable(add_args) and callable(run), name
        p = argparse.ArgumentParser()
        add_args(p)  # builds without error
    assert not set(BUILTIN) & set(COMMANDS)


def test_only_the_command_being_run_gets_its_arguments():
    sub = next(a for a in build_parser(["info", "--json"])._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) == set(BUILTIN) | set(COMMANDS)
    assert any(a.dest == "json" for a in sub.choices["info"]._actions)
    assert [a.dest for a in sub.choices["finetune"]._actions] == ["help"]  # listed, not built


@pytest.mark.parametrize("name", [*BUILTIN, *COMMANDS])
def test_every_argument_has_help(name):
    def undocumented(parser: argparse.ArgumentParser, prefix: str) -> list[str]:
        missing = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                helps = {a.dest: a.help for a in action._choices_actions}
                missing += [f"{prefix} {n}" for n in action.choices if not helps.get(n)]
                for n, p in action.choices.items():
                    missing += undocumented(p, f"{prefix} {n}")
            elif not action.help:
                missing.append(f"{prefix} {action.option_strings[-1] if action.option_strings else action.dest}")
        return missing

    sub = next(a for a in build_parser([name])._actions if isinstance(a, argparse._SubParsersAction))
    assert undocumented(sub.choices[name], name) == []


def test_jobs_list_has_a_column_header(capsys, tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    for name, status in (
        ("b", {"state": "failed", "step": 1}),
        (
            "pretrain-a-run-name-longer-than-forty-characters-20261124",
            {"state": "finished", "step": 3, "total_steps": 3},
        ),
    ):
        (runs / name).mkdir(parents=True)
        (runs / name / "status.json").write_text(json.dumps(status))
    monkeypatch.setenv("BERTLAB_RUNS", str(runs))
    code, out, _ = _run(capsys, "jobs", "list")
    assert code == 0
    header, *rows = out.splitlines()
    assert header.split() == ["JOB", "KIND", "STATE", "PROGRESS", "ETA", "/", "WAITS", "FOR"]
    assert len(rows) == 2
    for column in ("KIND", "STATE", "PROGRESS"):  # each row's cells start under their header, long ids included
        start = header.index(column)
        assert all(row[start - 1] == " " and row[start] != " " for row in rows), out


def test_a_run_that_failed_before_its_config_lists_its_kind(capsys, tmp_path, monkeypatch):
    # (#13) a command-line run stopped by missing data has only status.json and log.txt: the jobs
    # list showed its kind as '?'; the command at the top of log.txt names it
    monkeypatch.setenv("BERTLAB_RUNS", str(tmp_path / "runs"))
    code, _, err = _run(
        capsys,
        "pretrain",
        "--config",
        str(REPO / "configs" / "default-model.yaml"),
        "name=early",
        "corpus=[/nonexistent/x]",
    )
    assert code == 2 and "/nonexistent/x" in err
    code, out, _ = _run(capsys, "jobs", "list")
    row = next(line for line in out.splitlines() if line.startswith("early-"))
    assert row.split()[1:3] == ["pretrain", "failed"], row
    # not alive, so nothing to cancel and it can be deleted
    run_id = row.split()[0]
    code, _, err = _run(capsys, "jobs", "cancel", run_id)
    assert code != 0 and "has already failed; nothing to cancel" in err, err
    assert _run(capsys, "jobs", "delete", run_id)[:2] == (0, f"deleted {run_id}\n")  # though this process lives on
    assert not (tmp_path / "runs" / run_id).exists()
