"""bertlab.cli: fill-mask / nsp / info in text and --json, and one-line errors with a non-zero
exit status (never a traceback). Most cases call `main` in-process; one runs `python -m bertlab`."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bertlab.cli import main

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
def test_fill_mask_json_is_a_list_per_mask(capsys, tiny_checkpoint):
    code, out, err = _run(capsys, "fill-mask", "--model", str(tiny_checkpoint), "--device", "cpu", "the [MASK] sat on the [MASK].", "--top-k", "3", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert isinstance(data, list) and len(data) == 2  # one list per [MASK]
    for per_mask in data:
        assert len(per_mask) == 3
        assert all(set(c) == {"token", "score"} for c in per_mask)
        scores = [c["score"] for c in per_mask]
        assert scores == sorted(scores, reverse=True) and all(0 <= s <= 1 for s in scores)


def test_fill_mask_json_several_texts(capsys, tiny_checkpoint):
    code, out, _ = _run(capsys, "fill-mask", "--model", str(tiny_checkpoint), "--json", "--top-k", "2", "the [MASK] sat.", "a [MASK] ran to the [MASK].")
    assert code == 0
    data = json.loads(out)
    assert [len(per_text) for per_text in data] == [1, 2]
    assert all(len(per_mask) == 2 for per_text in data for per_mask in per_text)


def test_fill_mask_text_output(capsys, tiny_checkpoint):
    code, out, _ = _run(capsys, "fill-mask", "--model", str(tiny_checkpoint), "The [MASK] sat on the [MASK].", "--top-k", "2")
    assert code == 0
    assert "[MASK] #1:" in out and "[MASK] #2:" in out and "joint fill: The " in out
    assert out.count("%") == 4


def test_fill_mask_reports_truncation(capsys, tiny_checkpoint):
    text = "the [MASK] sat. " + "the dog ran to the park. " * 20
    code, out, _ = _run(capsys, "fill-mask", "--model", str(tiny_checkpoint), text)
    assert code == 0 and "input truncated" in out


# --- nsp and info ---------------------------------------------------------------------------------
def test_nsp_json_and_text(capsys, tiny_checkpoint):
    code, out, _ = _run(capsys, "nsp", "--model", str(tiny_checkpoint), "--json", "the cat sat.", "it was big.")
    assert code == 0
    data = json.loads(out)
    assert set(data) == {"is_next_prob", "is_next", "truncated"}
    assert 0 <= data["is_next_prob"] <= 1 and data["is_next"] == (data["is_next_prob"] >= 0.5)
    code, out, _ = _run(capsys, "nsp", "--model", str(tiny_checkpoint), "the cat sat.", "it was big.")
    assert code == 0 and "P(IsNext)" in out


def test_info_json_and_text(capsys, tiny_checkpoint, tokenizer):
    code, out, _ = _run(capsys, "info", "--model", str(tiny_checkpoint), "--json")
    assert code == 0
    data = json.loads(out)
    assert data["config"]["num_layers"] == 2 and data["config"]["hidden_size"] == 32
    assert data["vocab_size"] == len(tokenizer) and data["lowercase"] is True
    assert data["has_nsp_head"] is True and data["parameters"] > 0
    assert data["path"] == str(tiny_checkpoint)
    code, out, _ = _run(capsys, "info", "--model", str(tiny_checkpoint))
    assert code == 0 and "L=2 H=32 A=4" in out and "uncased" in out


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

    from bertlab.checkpoint import save_checkpoint
    from bertlab.model import BertForPreTraining

    d = save_checkpoint(tmp_path / "no-nsp", BertForPreTraining(tiny_config(len(tokenizer), use_nsp_head=False)), tokenizer)
    code, out, err = _run(capsys, "nsp", "--model", str(d), "a cat", "a dog")
    _assert_one_line_error(code, out, err, "next-sentence")


# --- a real process ------------------------------------------------------------------------------
def test_python_m_bertlab_subprocess(tiny_checkpoint, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    ok = subprocess.run(
        [sys.executable, "-m", "bertlab", "fill-mask", "--model", str(tiny_checkpoint), "the cat [MASK].", "--top-k", "3", "--json"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    data = json.loads(ok.stdout)
    assert len(data) == 1 and len(data[0]) == 3 and set(data[0][0]) == {"token", "score"}
    bad = subprocess.run(
        [sys.executable, "-m", "bertlab", "fill-mask", "--model", str(tmp_path / "missing"), "the cat [MASK]."],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )
    assert bad.returncode == 2 and bad.stdout == ""
    assert "Traceback" not in bad.stderr
    assert [line for line in bad.stderr.splitlines() if line.startswith("bertlab fill-mask: error:")]


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
