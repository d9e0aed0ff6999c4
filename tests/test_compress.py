"""bertlab.compress, the int8 folder format (bertlab.storage.quantized) and pruned layers
(BertConfig.pruned_heads): each command on a tiny random BERT, one built by transformers and the
shipped model; reload equal to the model held in memory; int8 close to fp32; removed heads equal to
masked heads; one-line errors with nothing written; the CLI."""

from __future__ import annotations

import json

import pytest
import torch

from bertlab.cli import main
from bertlab.compress.measure import RECORD_FILE, masked_lm_accuracy
from bertlab.compress.prune import heads_to_prune, parse_order, prune
from bertlab.compress.quantize import quantize
from bertlab.config import BertConfig, parameter_count
from bertlab.errors import BertLabError, CheckpointError, InputError
from bertlab.inference import load_model
from bertlab.interpret.heads import MaskedSentences, head_importance
from bertlab.model import BertForPreTraining
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
    assert load_model(out).num_parameters() == load_model(tiny_checkpoint).num_parameters()  # int8 ones counted
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


# --------------------------------------------------------------------------------------
# prune
# --------------------------------------------------------------------------------------
def _masked_logits(loaded, pruned_heads):
    """The unpruned model's logits with `pruned_heads` (layer -> heads) switched off by the head mask."""
    mask = torch.ones(loaded.config.num_layers, loaded.config.num_heads)
    for layer, heads in pruned_heads.items():
        mask[int(layer), heads] = 0
    enc = [loaded.tokenizer.encode(t, max_length=loaded.max_length) for t in SAMPLE_TEXT]
    with torch.inference_mode():
        return loaded.model(**loaded._batch(enc), head_mask=mask).mlm_logits.float()


def test_removed_heads_compute_as_masked_heads_and_reload(tiny_checkpoint, tmp_path, held_out):
    record, pruned = prune(tiny_checkpoint, tmp_path / "p", heads=0.25, held_out=held_out, **FAST)
    removed = record.details["pruned_heads"]
    assert record.details["heads_removed"] == 2 and record.details["order"] == "importance"
    reloaded = load_model(tmp_path / "p")
    torch.testing.assert_close(_logits(reloaded), _logits(pruned), rtol=0, atol=0)
    torch.testing.assert_close(_logits(pruned), _masked_logits(load_model(tiny_checkpoint), removed), rtol=0, atol=1e-5)
    cfg = json.loads((tmp_path / "p" / "config.json").read_text())
    assert cfg["pruned_heads"] == removed and cfg["num_attention_heads"] == 4
    layer, heads = next(iter(removed.items()))
    kept = (4 - len(heads)) * 8  # head_size 8
    state = read_weights(tmp_path / "p")
    assert state[f"bert.encoder.layer.{layer}.attention.self.query.weight"].shape == (kept, 32)
    assert state[f"bert.encoder.layer.{layer}.attention.output.dense.weight"].shape == (32, kept)
    assert record.after.parameters < record.before.parameters
    assert record.after.weights_bytes == (tmp_path / "p" / "model.safetensors").stat().st_size
    # a head mask over the unpruned numbering still applies to the kept heads
    mask = torch.ones(2, 4)
    torch.testing.assert_close(_masked_logits(reloaded, {}), _logits(reloaded), rtol=0, atol=0)
    assert reloaded.fill_mask("the [MASK] sat on the mat", head_mask=mask).masks
    # the attention maps keep one per unpruned head, the removed ones all zeros (as masked heads)
    seen = reloaded.inspect("the cat sat on the mat")
    assert seen.attentions.shape[:2] == (2, 4)
    for layer, gone in removed.items():
        assert (seen.attentions[int(layer), gone] == 0).all()
        kept = [h for h in range(4) if h not in gone]
        assert seen.attentions[int(layer), kept].sum(-1) == pytest.approx(1.0, abs=1e-5)


def test_head_importance_of_a_pruned_model_scores_removed_heads_zero(tiny_checkpoint, tmp_path):
    prune(tiny_checkpoint, tmp_path / "p", heads=0.25, order=parse_order("0:2,1:0"), **FAST)
    scores = head_importance(load_model(tmp_path / "p"), MaskedSentences(SAMPLE_TEXT)).raw
    assert scores[0, 2] == scores[1, 0] == 0 and (scores[0, [0, 1, 3]] > 0).all()


def test_an_unpruned_config_writes_no_pruned_heads_and_a_bad_one_is_one_line(tiny_checkpoint, tmp_path):
    config = BertConfig(vocab_size=50, hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64)
    assert "pruned_heads" not in config.to_hf_dict()
    pruned = config.replace(pruned_heads=((1, (0, 2)),))
    assert BertConfig.from_hf_dict(pruned.to_hf_dict()) == pruned and pruned.heads_in_layer(1) == 2
    assert parameter_count(pruned) == BertForPreTraining(pruned).num_parameters() < parameter_count(config)
    raw = config.to_hf_dict() | {"pruned_heads": {"0": [0, 1, 2, 3]}}
    with pytest.raises(CheckpointError, match="no heads left"):
        BertConfig.from_hf_dict(raw)


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory, tokenizer):
    """A tiny random BertForPreTraining saved by transformers, with our vocabulary: (folder, model)."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    hf = transformers.BertForPreTraining(
        transformers.BertConfig(
            vocab_size=len(tokenizer),
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            max_position_embeddings=64,
        )
    ).eval()
    folder = tmp_path_factory.mktemp("hf") / "hf"
    hf.save_pretrained(folder)
    tokenizer.save(folder)
    return folder, hf


def test_pruned_transformers_model(hf_folder, tmp_path):
    import transformers

    folder, hf = hf_folder
    order = parse_order("1:3,0:0,1:1,1:2,1:0")  # 1:0 would be layer 1's last head: skipped
    record, pruned = prune(folder, tmp_path / "p", heads=0.5, order=order, **FAST)
    assert record.details["pruned_heads"] == {"0": [0], "1": [1, 2, 3]}
    torch.testing.assert_close(
        _logits(pruned), _masked_logits(load_model(folder), {0: [0], 1: [1, 2, 3]}), rtol=0, atol=1e-5
    )
    with torch.inference_mode():  # our unpruned reading of the folder is transformers' own
        ids = torch.tensor([[2, 10, 11, 3]])
        torch.testing.assert_close(
            load_model(folder).model(ids).mlm_logits, hf(ids).prediction_logits, rtol=0, atol=1e-5
        )
    # transformers 5 dropped head pruning (4 read config.json's pruned_heads): it refuses the smaller
    # matrices rather than loading them wrong
    with pytest.raises(RuntimeError, match="ignore_mismatched_sizes"):
        transformers.BertForPreTraining.from_pretrained(tmp_path / "p")


def test_magnitude_pruning_states_its_sparsity(tiny_checkpoint, tmp_path):
    record, pruned = prune(tiny_checkpoint, tmp_path / "s", sparsity=0.5, **FAST)
    assert record.details["sparsity"] == pytest.approx(0.5, abs=0.01)
    weight = pruned.model.bert.encoder.layer[0].intermediate.dense.weight
    assert float((weight == 0).float().mean()) == pytest.approx(0.5, abs=0.01)
    torch.testing.assert_close(_logits(load_model(tmp_path / "s")), _logits(pruned), rtol=0, atol=0)
    assert json.loads((tmp_path / "s" / RECORD_FILE).read_text())["details"]["sparsity"] == record.details["sparsity"]


def test_shipped_model_pruned_by_importance(tmp_path):
    record, pruned = prune(default_model_path(), tmp_path / "mini-heads", heads=0.25, **FAST)
    assert record.details["heads_removed"] == 4 and record.before.dtype == record.after.dtype == "float16"
    reloaded = load_model(tmp_path / "mini-heads")
    torch.testing.assert_close(_logits(reloaded), _logits(pruned), rtol=0, atol=0)
    assert record.after.weights_bytes < record.before.weights_bytes


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(sparsity=1.5), "--sparsity must be a share above 0 and below 1"),
        (dict(heads=1.0), "--heads must be a share"),
        (dict(heads=0.9), "each layer keeps at least one"),
        (dict(heads=0.25, sparsity=0.5), "give one of --heads"),
        (dict(), "give one of --heads"),
        (dict(heads=0.25, order=[(5, 0)]), "outside 2 layers"),
    ],
)
def test_bad_pruning_input_is_one_line_and_writes_nothing(tiny_checkpoint, tmp_path, kwargs, message):
    with pytest.raises(InputError, match=message) as caught:
        prune(tiny_checkpoint, tmp_path / "out", **kwargs, **FAST)
    assert "\n" not in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_pruning_an_int8_or_pruned_model_is_refused(tiny_int8, tiny_checkpoint, tmp_path):
    with pytest.raises(InputError, match="prune its float source"):
        prune(tiny_int8[0], tmp_path / "a", heads=0.25, **FAST)
    prune(tiny_checkpoint, tmp_path / "once", heads=0.25, order=parse_order("0:0,1:0"), **FAST)
    with pytest.raises(InputError, match="pruned already"):
        prune(tmp_path / "once", tmp_path / "twice", heads=0.25, order=parse_order("0:1,1:1"), **FAST)
    assert not (tmp_path / "twice").exists() and not (tmp_path / "a").exists()
    with pytest.raises(InputError, match="layer:head"):
        parse_order("0-1")
    assert heads_to_prune(2, 4, [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0)], 0.5) == {0: [0, 1, 2], 1: [0]}


def test_cli_prune(tiny_checkpoint, tmp_path, capsys):
    args = ["compress", "prune", "--model", str(tiny_checkpoint), "--repeats", "2"]
    assert main([*args, "--out", str(tmp_path / "p"), "--heads", "0.25", "--order", "0:1,1:2"]) == 0
    assert "pruned_heads: {'0': [1], '1': [2]}" in capsys.readouterr().out
    assert main([*args, "--out", str(tmp_path / "q"), "--sparsity", "1.5"]) == 2
    assert "--sparsity must be a share" in capsys.readouterr().err


def test_int8_of_a_transformers_model_and_of_a_pruned_one(hf_folder, tmp_path):
    folder, _ = hf_folder
    record, compressed = quantize(folder, tmp_path / "hf-int8", **FAST)
    torch.testing.assert_close(_logits(load_model(tmp_path / "hf-int8")), _logits(compressed), rtol=0, atol=0)
    torch.testing.assert_close(_logits(compressed), _logits(load_model(folder)), rtol=0, atol=0.05)
    prune(folder, tmp_path / "pruned", heads=0.25, order=parse_order("0:0,1:3"), **FAST)
    record, compressed = quantize(tmp_path / "pruned", tmp_path / "pruned-int8", **FAST)
    reloaded = load_model(tmp_path / "pruned-int8")
    assert reloaded.config.pruned_heads == ((0, (0,)), (1, (3,)))
    torch.testing.assert_close(_logits(reloaded), _logits(compressed), rtol=0, atol=0)


def test_other_families(tiny_albert_checkpoint, tiny_electra_pair, tmp_path):
    quantize(tiny_albert_checkpoint, tmp_path / "albert-int8", **FAST)
    assert load_model(tmp_path / "albert-int8").info["quantization"] == "int8-dynamic"
    with pytest.raises(InputError, match="ALBERT model; --heads prunes BERT folders only"):
        prune(tiny_albert_checkpoint, tmp_path / "albert-heads", heads=0.25, **FAST)
    with pytest.raises(InputError, match="pair folder .*compress one half"):
        quantize(tiny_electra_pair, tmp_path / "pair", **FAST)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["albert-int8"]
