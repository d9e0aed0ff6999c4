"""bertlab.storage.modelfolder: the model folder's names and checks, one owner for every reader."""

from __future__ import annotations

import os
import subprocess
import sys

from bertlab.storage import checkpoint, hub, runfolder
from bertlab.storage.modelfolder import (
    CONFIG_FILE,
    WEIGHTS_FILES,
    folder_stamp,
    has_config,
    is_model_folder,
    weights_path,
)


def test_a_model_folder_needs_config_and_weights(tmp_path):
    assert not has_config(tmp_path) and not is_model_folder(tmp_path) and weights_path(tmp_path) is None
    (tmp_path / CONFIG_FILE).write_text("{}")
    assert has_config(tmp_path) and not is_model_folder(tmp_path)
    (tmp_path / "pytorch_model.bin").write_bytes(b"")
    assert is_model_folder(tmp_path) and weights_path(tmp_path).name == "pytorch_model.bin"
    (tmp_path / "model.safetensors").write_bytes(b"")
    assert weights_path(tmp_path).name == WEIGHTS_FILES[0] == "model.safetensors"  # safetensors first
    assert not is_model_folder(tmp_path / CONFIG_FILE)  # a file is not a folder
    assert checkpoint.is_checkpoint_dir is is_model_folder


def test_folder_stamp_follows_the_newest_model_file(tmp_path):
    assert folder_stamp(tmp_path) == 0.0
    (tmp_path / CONFIG_FILE).write_text("{}")
    (tmp_path / "model.safetensors").write_bytes(b"")
    os.utime(tmp_path / CONFIG_FILE, (100, 100))
    os.utime(tmp_path / "model.safetensors", (200, 200))
    assert folder_stamp(tmp_path) == 200
    os.utime(tmp_path / "model.safetensors", (300, 300))  # the weights rewritten: a new stamp
    assert folder_stamp(str(tmp_path)) == 300


def test_the_run_folder_and_the_hub_cache_ask_it(tmp_path):
    run = tmp_path / "run"
    runfolder.model_dir(run).mkdir(parents=True)
    assert not runfolder.has_model(run)
    (runfolder.model_dir(run) / CONFIG_FILE).write_text("{}")
    assert runfolder.has_model(run)
    snap = tmp_path / "snap"
    snap.mkdir()
    for name in (CONFIG_FILE, "model.safetensors"):
        (snap / name).write_text("{}")
    assert not hub._snapshot_ok(snap)  # no vocabulary yet
    (snap / "vocab.txt").write_text("[PAD]\n")
    assert hub._snapshot_ok(snap)


def test_modelfolder_imports_no_torch():
    code = "import sys, bertlab.storage.modelfolder; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_stored_parameter_count_is_each_familys_own(
    tmp_path, tiny_checkpoint, tiny_albert_checkpoint, tiny_electra_pair
):
    """Read from model.safetensors' header: BERT's, ALBERT's (its shared layer once) and an ELECTRA pair's
    (both halves, their shared embeddings once) equal the built models' counts; no safetensors, no count."""
    from bertlab.models.registry import build_model
    from bertlab.storage.checkpoint import load_config
    from bertlab.storage.modelfolder import stored_parameter_count

    for folder in (tiny_checkpoint, tiny_albert_checkpoint, tiny_electra_pair):
        config, _ = load_config(folder)
        model = build_model(config)
        assert stored_parameter_count(folder) == sum(p.numel() for p in model.parameters()), folder
    assert stored_parameter_count(tmp_path) is None
    (tmp_path / "model.safetensors").write_bytes(b"\xff" * 16)  # not a safetensors file
    assert stored_parameter_count(tmp_path) is None
