"""bertlab.compress and the int8 folder format (bertlab.storage.quantized): each command on a tiny
random BERT and on the shipped model, reload equal to the model held in memory, int8 close to fp32,
one-line errors with nothing written, and the CLI."""

from __future__ import annotations

import json

import pytest
import torch

from bertlab.cli import main
from bertlab.compress.measure import RECORD_FILE, masked_lm_accuracy
from bertlab.compress.quantize import quantize
from bertlab.errors import BertLabError, CheckpointError, InputError
from bertlab.inference import load_model
from bertlab.storage import quantized
from bertlab.storage.checkpoint import default_model_path, read_weights
from tests.conftest import SAMPLE_TEXT

FAST = dict(repeats=2, threads=(1,))


def _logits(loaded, texts=SAMPLE_TEXT):
    enc = [loaded.tokenizer.encode(t, max_length=loaded.max_length) for t in texts]
    with torch.inference_mode():
        return loaded.model(**loaded._batch(enc)).mlm_logits.float()


@pytest.fixture(scope="module")
def held_out(tmp_path_factory):
    path = tmp_path_factory.mktemp("held") / "held.txt"
    path.write_text("\n".join(SAMPLE_TEXT) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tiny_int8(tiny_checkpoint, tmp_path_factory, held_out):
    out = tmp_path_factory.mktemp("int8") / "tiny-int8"
    record, compressed = quantize(tiny_checkpoint, out, "int8-dynamic", held_out=held_out, **FAST)
    return out, record, compressed


def test_int8_folder_reloads_as_the_model_in_memory(tiny_int8):
    out, record, compressed = tiny_int8
    reloaded = load_model(out)
    assert reloaded.info["quantization"] == "int8-dynamic" and quantized.is_int8(reloaded.model)
    torch.testing.assert_close(_logits(reloaded), _logits(compressed), rtol=0, atol=0)
    state = read_weights(out)
    query = "bert.encoder.layer.0.attention.self.query"
    assert state[f"{query}.weight"].dtype == torch.int8
    assert state[query + quantized.SCALE_SUFFIX].shape == (32,)  # one scale per output channel
    assert state["bert.embeddings.word_embeddings.weight"].dtype == torch.float32
    assert (out / "model.safetensors").stat().st_size == record.after.weights_bytes


def test_int8_logits_close_to_fp32(tiny_checkpoint, tiny_int8):
    # dynamic int8 rounds each weight to 1/254 of its row's range and each activation to its
    # tensor's: on this random tiny model the masked-LM logits (about +-1) move by < 0.05
    torch.testing.assert_close(_logits(tiny_int8[2]), _logits(load_model(tiny_checkpoint)), rtol=0, atol=0.05)


def test_int8_record_and_gradient_flag(tiny_int8, tiny_checkpoint):
    out, record, compressed = tiny_int8
    saved = json.loads((out / RECORD_FILE).read_text())
    assert saved["scheme"] == "int8-dynamic" and saved["after"]["dtype"] == "int8"
    assert saved["before"]["parameters"] == saved["after"]["parameters"] == load_model(tiny_checkpoint).num_parameters()
    assert saved["after"]["weights_bytes"] < saved["fp32_weights_bytes"]
    assert 0 <= saved["after"]["mlm_accuracy"] <= 1 and saved["held_out"]
    assert [lat["threads"] for lat in saved["after"]["latency"]] == [1]
    assert not load_model(out).supports_gradients and not compressed.supports_gradients
    assert load_model(tiny_checkpoint).supports_gradients


def test_transformers_refuses_an_int8_folder_instead_of_misreading_it(tiny_int8):
    transformers = pytest.importorskip("transformers")
    with pytest.raises(ValueError, match="not a floating-point dtype"):
        transformers.BertForPreTraining.from_pretrained(tiny_int8[0])


@pytest.mark.parametrize("scheme,dtype", [("bf16", torch.bfloat16), ("fp16", torch.float16)])
def test_half_schemes_save_cast_weights_that_load_as_they_are(tiny_checkpoint, tmp_path, scheme, dtype):
    record, compressed = quantize(tiny_checkpoint, tmp_path / scheme, scheme, **FAST)
    state = read_weights(tmp_path / scheme)
    assert {v.dtype for v in state.values() if v.is_floating_point()} == {dtype}
    reloaded = load_model(tmp_path / scheme, dtype=dtype)
    torch.testing.assert_close(_logits(reloaded), _logits(compressed), rtol=0, atol=0)
    assert reloaded.supports_gradients and record.after.dtype == str(dtype).removeprefix("torch.")
    assert record.after.weights_bytes < 0.6 * record.fp32_weights_bytes


def test_shipped_model_int8(tmp_path):
    record, compressed = quantize(default_model_path(), tmp_path / "mini-int8", **FAST)
    reloaded = load_model(tmp_path / "mini-int8")
    torch.testing.assert_close(_logits(reloaded), _logits(compressed), rtol=0, atol=0)
    # the shipped folder is fp16: the int8 folder keeps the float parts in fp16 (lossless) and is
    # smaller than the source as stored, not only than fp32
    assert record.before.dtype == "float16"
    assert record.after.weights_bytes < record.before.weights_bytes < record.fp32_weights_bytes
    assert reloaded.fill_mask("The capital of France is [MASK].").masks[0].candidates


def test_masked_lm_accuracy_is_the_same_questions_for_every_model(tiny_checkpoint):
    loaded = load_model(tiny_checkpoint)
    assert masked_lm_accuracy(loaded, SAMPLE_TEXT) == masked_lm_accuracy(loaded, SAMPLE_TEXT)
    with pytest.raises(InputError, match="no tokens"):
        masked_lm_accuracy(loaded, ["", "  "])


def test_an_output_folder_in_use_is_refused_and_left_alone(tiny_checkpoint, tiny_int8, tmp_path):
    before = sorted(p.name for p in tiny_int8[0].iterdir())
    with pytest.raises(InputError, match="already holds a model"):
        quantize(tiny_checkpoint, tiny_int8[0], **FAST)
    assert sorted(p.name for p in tiny_int8[0].iterdir()) == before
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="not empty"):
        quantize(tiny_checkpoint, tmp_path / "busy", **FAST)
    with pytest.raises(InputError, match="own folder"):
        quantize(tiny_checkpoint, tiny_checkpoint, **FAST)
    with pytest.raises(InputError, match="already quantized"):
        quantize(tiny_int8[0], tmp_path / "twice", **FAST)
    assert not (tmp_path / "twice").exists()


def test_a_folder_without_weights_or_a_bad_scheme_writes_nothing(tiny_checkpoint, tmp_path):
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "config.json").write_text((tiny_checkpoint / "config.json").read_text())
    with pytest.raises(CheckpointError, match="no model.safetensors"):
        quantize(bare, tmp_path / "out", **FAST)
    with pytest.raises(InputError, match="int4"):
        quantize(tiny_checkpoint, tmp_path / "out", "int4", **FAST)
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["bare"]  # no temporary folder left behind either


def test_unknown_quantization_in_config_is_one_line(tiny_int8, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(tiny_int8[0], copy)
    cfg = json.loads((copy / "config.json").read_text())
    cfg["bertlab"]["quantization"] = "int4"
    (copy / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match="'int4'"):
        load_model(copy)
    with pytest.raises(InputError, match="float32"):
        load_model(tiny_int8[0], dtype=torch.float16)


def test_cli_prints_the_record_and_errors_in_one_line(tiny_checkpoint, tmp_path, capsys):
    out = tmp_path / "cli-int8"
    assert main(["compress", "quantize", "--model", str(tiny_checkpoint), "--out", str(out), "--repeats", "2"]) == 0
    text = capsys.readouterr().out
    assert "quantize int8-dynamic" in text and "x of fp32" in text and "2 thread(s)" in text
    assert main(["compress", "quantize", "--model", str(tiny_checkpoint), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "already holds a model" in err and "\n" not in err
    assert issubclass(InputError, BertLabError)
