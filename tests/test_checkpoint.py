"""bertlab.storage.checkpoint: our format round-trips, checkpoints saved by transformers load here (and
give the same fill-mask answers as transformers' own logits), ours open in transformers, and
every broken folder raises a CheckpointError that names the culprit."""

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from conftest import tiny_config
from torch.testing import assert_close

from bertlab.errors import CheckpointError, InputError
from bertlab.inference import LoadedModel, load_model
from bertlab.model import BertForPreTraining
from bertlab.models import bert
from bertlab.storage import checkpoint
from bertlab.storage.checkpoint import load_pretraining_model, resolve, save_checkpoint

transformers = pytest.importorskip("transformers")

TEXTS = ["the cat sat on the [MASK].", "paris is the [MASK] of [MASK].", "[MASK] dog ran to the park"]


def _hf_config(vocab_size: int) -> "transformers.BertConfig":
    return transformers.BertConfig(
        **{k: v for k, v in tiny_config(vocab_size).to_hf_dict().items() if k not in ("architectures", "bertlab")}
    )


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


@pytest.fixture(scope="module")
def hf_pretraining_dir(tmp_path_factory, tokenizer, vocab_file):
    """A random BertForPreTraining saved by transformers, plus a vocab.txt."""
    torch.manual_seed(7)
    model = transformers.BertForPreTraining(_hf_config(len(tokenizer))).eval()
    d = tmp_path_factory.mktemp("hf") / "pretraining"
    model.save_pretrained(d)
    shutil.copy(vocab_file, d / "vocab.txt")
    return d


def _hf_top_k(model_dir: Path, texts, tokenizer, k=3, cls=None):
    """Top-k (token, prob) at every [MASK], computed by transformers from its own logits."""
    cls = cls or transformers.BertForPreTraining
    model = cls.from_pretrained(model_dir, attn_implementation="eager").eval()
    out = []
    for text in texts:
        enc = tokenizer.encode(text)
        with torch.no_grad():
            res = model(input_ids=torch.tensor([enc.ids]), token_type_ids=torch.tensor([enc.type_ids]))
        logits = res.prediction_logits if hasattr(res, "prediction_logits") else res.logits
        probs = logits[0].softmax(-1)
        per_mask = []
        for p, i in enumerate(enc.ids):
            if i == tokenizer.mask_id:
                scores, ids = probs[p].topk(k)
                per_mask.append((tokenizer.convert_ids_to_tokens(ids.tolist()), scores))
        out.append(per_mask)
    return out


def _assert_same_answers(lm: LoadedModel, reference, texts, k=3):
    for text, ref in zip(texts, reference, strict=True):
        res = lm.fill_mask(text, top_k=k)
        assert len(res.masks) == len(ref)
        for mask, (ref_tokens, ref_scores) in zip(res.masks, ref, strict=True):
            assert [c.token for c in mask.candidates] == ref_tokens
            assert_close(torch.tensor([c.score for c in mask.candidates]), ref_scores, atol=1e-5, rtol=1e-4)


# --- our own format -------------------------------------------------------------------------
def test_roundtrip(tmp_path, tokenizer):
    torch.manual_seed(1)
    model = BertForPreTraining(tiny_config(len(tokenizer))).eval()
    d = save_checkpoint(
        tmp_path / "ckpt",
        model,
        tokenizer,
        extra_config={"note": "hi"},
        extra_files={"model_card.json": {"metrics": {"mlm_acc": 0.5}}},
    )
    assert checkpoint.is_checkpoint_dir(d)
    loaded, tok, info = load_pretraining_model(d)
    assert loaded.config == model.config and not loaded.training
    assert info["missing"] == [] and info["card"] == {"metrics": {"mlm_acc": 0.5}}
    assert info["raw_config"]["bertlab"]["note"] == "hi"
    assert tok.vocab == tokenizer.vocab
    for k, v in model.state_dict().items():
        assert torch.equal(v, loaded.state_dict()[k]), k
    assert loaded.cls.predictions.decoder.weight is loaded.bert.embeddings.word_embeddings.weight
    for f in d.iterdir():  # everyone who can read the folder can read every file (umask 022 here)
        assert f.stat().st_mode & 0o044 == 0o044, f.name


def test_roundtrip_no_nsp_and_half_precision(tmp_path, tokenizer):
    model = BertForPreTraining(tiny_config(len(tokenizer), use_nsp_head=False))
    d = save_checkpoint(tmp_path / "ckpt", model, tokenizer, dtype=torch.float16)
    loaded, _, _ = load_pretraining_model(d)
    assert loaded.cls.seq_relationship is None
    assert loaded.bert.embeddings.word_embeddings.weight.dtype == torch.float32
    assert_close(
        loaded.bert.embeddings.word_embeddings.weight, model.bert.embeddings.word_embeddings.weight.half().float()
    )
    with pytest.raises(InputError, match="next-sentence"):
        LoadedModel(*load_pretraining_model(d)).next_sentence("a", "b")


# --- checkpoints written by transformers ------------------------------------------------------
def test_transformers_pretraining_checkpoint_gives_same_fill_mask(hf_pretraining_dir, tokenizer):
    lm = load_model(hf_pretraining_dir, device="cpu")
    assert lm.info["missing"] == [] and lm.has_nsp
    _assert_same_answers(lm, _hf_top_k(hf_pretraining_dir, TEXTS, tokenizer), TEXTS)


def test_transformers_pytorch_model_bin_loads(tmp_path, hf_pretraining_dir, tokenizer):
    # transformers 5 always writes safetensors, so write the legacy file ourselves.
    d = tmp_path / "bin"
    d.mkdir()
    for name in ("config.json", "vocab.txt"):
        shutil.copy(hf_pretraining_dir / name, d / name)
    hf = transformers.BertForPreTraining.from_pretrained(hf_pretraining_dir)
    torch.save(hf.state_dict(), d / "pytorch_model.bin")  # includes the tied decoder copies
    assert checkpoint.is_checkpoint_dir(d)
    from_bin = load_model(d, device="cpu")
    from_st = load_model(hf_pretraining_dir, device="cpu")
    for k, v in from_st.model.state_dict().items():
        assert torch.equal(v, from_bin.model.state_dict()[k]), k


def test_tf_era_layernorm_names_and_bare_encoder_keys_load(tmp_path, tiny_checkpoint):
    state = checkpoint.read_weights(tiny_checkpoint)
    renamed = {}
    for k, v in state.items():
        k = k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")
        renamed[k.removeprefix("bert.")] = v
    d = _copy(tiny_checkpoint, tmp_path / "old")
    (d / "model.safetensors").unlink()
    torch.save(renamed, d / "pytorch_model.bin")
    model, _, info = load_pretraining_model(d)
    assert info["missing"] == []
    assert torch.equal(model.bert.embeddings.LayerNorm.weight, state["bert.embeddings.LayerNorm.weight"])


def test_masked_lm_checkpoint_loads_without_nsp(tmp_path, tokenizer, vocab_file):
    torch.manual_seed(8)
    hf = transformers.BertForMaskedLM(_hf_config(len(tokenizer))).eval()
    d = tmp_path / "mlm"
    hf.save_pretrained(d)
    shutil.copy(vocab_file, d / "vocab.txt")
    lm = load_model(d, device="cpu")
    assert not lm.has_nsp
    with pytest.raises(InputError, match="next-sentence"):
        lm.next_sentence("the cat sat.", "it ran.")
    ref = _hf_top_k(d, TEXTS[:2], tokenizer, cls=transformers.BertForMaskedLM)
    _assert_same_answers(lm, ref, TEXTS[:2])
    assert lm.inspect("the cat").nsp_is_next_prob is None


# --- our checkpoints in transformers ------------------------------------------------------------
def test_ours_opens_in_transformers_with_same_logits(tiny_checkpoint, tokenizer):
    hf, loading = transformers.BertForPreTraining.from_pretrained(
        tiny_checkpoint, output_loading_info=True, attn_implementation="eager"
    )
    hf.eval()
    assert not [k for k in loading["missing_keys"] if "decoder" not in k]
    assert not loading["unexpected_keys"] and not loading["mismatched_keys"]
    ours, _, _ = load_pretraining_model(tiny_checkpoint)
    enc = tokenizer.encode("the cat sat on the [MASK].", "it was big.")
    ids, types = torch.tensor([enc.ids]), torch.tensor([enc.type_ids])
    with torch.no_grad():
        theirs = hf(input_ids=ids, token_type_ids=types)
        mine = ours(ids, types)
    assert_close(mine.mlm_logits, theirs.prediction_logits, atol=1e-5, rtol=1e-5)
    assert_close(mine.nsp_logits, theirs.seq_relationship_logits, atol=1e-5, rtol=1e-5)


def test_ours_tokenizer_opens_in_auto_tokenizer(tiny_checkpoint, tokenizer):
    auto = transformers.AutoTokenizer.from_pretrained(tiny_checkpoint)
    for text in ["The cat sat on the [MASK].", "Café, naïve ☃ (big) dog!", "paris is the capital of france"]:
        assert auto(text)["input_ids"] == tokenizer.encode(text).ids
    pair = auto("the cat", "the dog", return_token_type_ids=True)
    enc = tokenizer.encode("the cat", "the dog")
    assert pair["input_ids"] == enc.ids and pair["token_type_ids"] == enc.type_ids


# --- broken folders ------------------------------------------------------------------------
def test_truncated_safetensors(tmp_path, tiny_checkpoint):
    d = _copy(tiny_checkpoint, tmp_path / "c")
    data = (d / "model.safetensors").read_bytes()
    (d / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="model.safetensors"):
        load_model(d, device="cpu")


def test_corrupt_config_json(tmp_path, tiny_checkpoint):
    d = _copy(tiny_checkpoint, tmp_path / "c")
    text = (d / "config.json").read_text()
    (d / "config.json").write_text(text[: len(text) // 2])
    with pytest.raises(CheckpointError, match="config.json"):
        load_model(d, device="cpu")
    (d / "config.json").write_text("[1, 2]")
    with pytest.raises(CheckpointError, match="config.json"):
        load_model(d, device="cpu")
    (d / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 32}))
    with pytest.raises(CheckpointError, match="config.json.*vocab_size"):
        load_model(d, device="cpu")


def test_missing_vocab(tmp_path, tiny_checkpoint):
    d = _copy(tiny_checkpoint, tmp_path / "c")
    (d / "vocab.txt").unlink()
    load_model(d, device="cpu")  # tokenizer.json holds the vocabulary too
    (d / "tokenizer.json").unlink()
    with pytest.raises(CheckpointError, match="no vocab.txt or tokenizer.json"):
        load_model(d, device="cpu")


def test_missing_weights(tmp_path, tiny_checkpoint):
    d = _copy(tiny_checkpoint, tmp_path / "c")
    (d / "model.safetensors").unlink()
    with pytest.raises(CheckpointError, match="model.safetensors"):
        load_model(d, device="cpu")


def test_shape_mismatch_names_the_weights_file(tmp_path, tiny_checkpoint):
    d = _copy(tiny_checkpoint, tmp_path / "c")
    cfg = json.loads((d / "config.json").read_text())
    cfg["intermediate_size"] = 48
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CheckpointError, match=r"model.safetensors.*intermediate"):
        load_model(d, device="cpu")


def test_vocab_larger_than_config(tmp_path, tiny_checkpoint):
    d = _copy(tiny_checkpoint, tmp_path / "c")
    with open(d / "vocab.txt", "a", encoding="utf-8") as f:
        f.write("".join(f"extra{i}\n" for i in range(10)))
    with pytest.raises(CheckpointError, match="vocab_size"):
        load_model(d, device="cpu")


def test_incomplete_weights(tmp_path, tiny_checkpoint):
    d = _copy(tiny_checkpoint, tmp_path / "c")
    state = checkpoint.read_weights(d)
    del state["bert.encoder.layer.1.output.dense.weight"]
    from safetensors.torch import save_file

    save_file(state, str(d / "model.safetensors"))
    with pytest.raises(CheckpointError, match="layer.1.output.dense.weight"):
        load_model(d, device="cpu")


def test_file_instead_of_folder(tiny_checkpoint):
    with pytest.raises(CheckpointError, match="config.json.*is a file"):
        load_model(tiny_checkpoint / "config.json", device="cpu")


def test_nonexistent_paths(tmp_path):
    for path in (tmp_path / "nope", "./nope", "../a/b/c", "~/definitely-not-here-bertlab"):
        with pytest.raises(CheckpointError, match="no such checkpoint folder"):
            resolve(path)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CheckpointError, match="no config.json"):
        load_model(empty, device="cpu")


def test_hub_id_while_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # huggingface_hub read HF_HUB_OFFLINE at import (unset then); bertlab must read it again now
    with pytest.raises(CheckpointError, match="HF_HUB_OFFLINE.*offline"):
        load_model("bertlab-test/definitely-not-cached", device="cpu")


# --- atomic writes ------------------------------------------------------------------------
def _leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


def test_failed_save_keeps_old_checkpoint_and_no_temp_dirs(tmp_path, tokenizer, monkeypatch):
    model = BertForPreTraining(tiny_config(len(tokenizer)))
    target = save_checkpoint(tmp_path / "ckpt", model, tokenizer)
    before = {p.name: p.read_bytes() for p in target.iterdir()}

    def broken_save_file(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(checkpoint, "save_file", broken_save_file)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(target, BertForPreTraining(tiny_config(len(tokenizer))), tokenizer)
    assert {p.name: p.read_bytes() for p in target.iterdir()} == before
    assert _leftovers(tmp_path) == []
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(tmp_path / "fresh", model, tokenizer)
    assert not (tmp_path / "fresh").exists() and _leftovers(tmp_path) == []


def test_overwrite_replaces_checkpoint_and_cleans_up(tmp_path, tokenizer):
    torch.manual_seed(0)
    first = BertForPreTraining(tiny_config(len(tokenizer)))
    torch.manual_seed(1)
    second = BertForPreTraining(tiny_config(len(tokenizer)))
    target = save_checkpoint(tmp_path / "ckpt", first, tokenizer)
    (target / "stale.json").write_text("{}")
    # a leftover from a save that was killed between its two renames must not block the next one
    (tmp_path / f".ckpt.old-{os.getpid()}").mkdir()
    save_checkpoint(target, second, tokenizer)
    loaded, _, _ = load_pretraining_model(target)
    assert torch.equal(loaded.bert.pooler.dense.weight, second.bert.pooler.dense.weight)
    assert not (target / "stale.json").exists()
    assert _leftovers(tmp_path) == []


def test_a_folder_saved_by_transformers_5_opens(tmp_path, tiny_checkpoint):
    """transformers 5 writes tokenizer.json and tokenizer_config.json but no vocab.txt."""
    transformers = pytest.importorskip("transformers")
    from bertlab.inference import load_model

    hf_dir = tmp_path / "hf"
    transformers.BertForPreTraining.from_pretrained(tiny_checkpoint).save_pretrained(hf_dir)
    tok = transformers.AutoTokenizer.from_pretrained(tiny_checkpoint)
    tok.save_pretrained(hf_dir)
    (hf_dir / "vocab.txt").unlink(missing_ok=True)  # as transformers 5 leaves it, whichever version runs here
    assert (hf_dir / "tokenizer.json").is_file() and not (hf_dir / "vocab.txt").exists()
    ours, theirs = load_model(tiny_checkpoint, device="cpu"), load_model(hf_dir, device="cpu")
    assert theirs.tokenizer.vocab == ours.tokenizer.vocab and theirs.tokenizer.lowercase == ours.tokenizer.lowercase
    a = ours.fill_mask("the cat [MASK] on the mat.").masks[0].candidates
    b = theirs.fill_mask("the cat [MASK] on the mat.").masks[0].candidates
    assert [c.token for c in a] == [c.token for c in b]
    assert [c.score for c in a] == pytest.approx([c.score for c in b], abs=1e-5)


@pytest.mark.parametrize("lowercase", [True, False], ids=["uncased", "cased"])
def test_transformers_5_folder_gives_transformers_fill_mask_top_k(tmp_path, vocab_file, lowercase):
    """Issue 12: the folder exactly as transformers 5 writes it (`BertForPreTraining.save_pretrained`
    + `BertTokenizer.save_pretrained`: tokenizer.json and tokenizer_config.json, no vocab.txt) gives
    in bertlab the top-k that transformers' own fill-mask pipeline gives on the same folder."""
    if int(transformers.__version__.split(".")[0]) < 5:
        pytest.skip("the folder layout under test is transformers 5's")
    vocab = {t: i for i, t in enumerate(vocab_file.read_text(encoding="utf-8").splitlines())}
    # transformers 5's BertTokenizer is the fast one: build it from the vocabulary itself
    # (BertTokenizerFast(vocab_file=...) silently ignores the file in transformers 5)
    tok = transformers.BertTokenizer(vocab=vocab, do_lower_case=lowercase)
    assert len(tok) == len(vocab)
    torch.manual_seed(5)
    cfg = _hf_config(len(vocab))
    cfg.initializer_range = 0.4  # peaked answers: top-k orders are not decided by rounding noise
    d = tmp_path / "t5"
    transformers.BertForPreTraining(cfg).eval().save_pretrained(d)
    tok.save_pretrained(d)
    assert (d / "tokenizer.json").is_file() and not (d / "vocab.txt").exists()  # nothing removed by hand

    theirs = transformers.AutoTokenizer.from_pretrained(d)
    mlm = transformers.BertForMaskedLM.from_pretrained(d, attn_implementation="eager").eval()
    pipe = transformers.pipeline("fill-mask", model=mlm, tokenizer=theirs, device="cpu")
    ours = load_model(d, device="cpu")
    assert ours.tokenizer.lowercase == lowercase
    assert (ours.tokenizer.encode("The cat").tokens[1] == "the") == lowercase  # cased: 'T ##h ##e'
    texts = ["The cat sat on the [MASK].", "Paris is the [MASK] of the park.", "the [MASK] ran to the park"]
    for text in texts:
        assert ours.tokenizer.encode(text).ids == theirs(text)["input_ids"]  # same WordPieces, same casing
        ref = pipe(text, top_k=5)
        got = ours.fill_mask(text, top_k=5).masks[0].candidates
        assert [c.token_id for c in got] == [r["token"] for r in ref]
        assert [c.score for c in got] == pytest.approx([r["score"] for r in ref], abs=1e-5)


def test_huge_vocab_size_in_config_is_refused_before_allocating(tmp_path, tiny_checkpoint, monkeypatch):
    # (#14) vocab_size: 10**12 used to allocate the model first (out of memory / traceback)
    d = _copy(tiny_checkpoint, tmp_path / "c")
    cfg = json.loads((d / "config.json").read_text())
    cfg["vocab_size"] = 10**12
    (d / "config.json").write_text(json.dumps(cfg))
    allocated = []
    real_init = BertForPreTraining.__init__

    def watch(self, *a, **kw):
        real_init(self, *a, **kw)
        allocated.append(next(self.parameters()).device.type)

    monkeypatch.setattr(BertForPreTraining, "__init__", watch)
    with pytest.raises(CheckpointError, match=r"model.safetensors: weights do not match config.json.*word_embeddings"):
        load_model(d, device="cpu")
    assert allocated == []  # refused from config.json's arithmetic: no model was built at all


@pytest.mark.parametrize(
    "changes",
    [{}, {"use_nsp_head": False}, {"attention_direction": "left_to_right"}, {"num_layers": 3, "intermediate_size": 24}],
)
def test_expected_shapes_are_the_models_own(changes):
    # check_shapes works out shapes by arithmetic (a meta-device model cost ~2 s per fill-mask);
    # the arithmetic must name every weight the real model has, with its shape
    config = tiny_config(50, **changes)
    own = {k: tuple(t.shape) for k, t in BertForPreTraining(config).state_dict().items()}
    assert bert.expected_shapes(config) == own


def test_refused_pickle_says_not_safe_and_how_to_convert(tmp_path, tiny_checkpoint):
    # (#14) torch's message told users to re-run with weights_only=False
    d = _copy(tiny_checkpoint, tmp_path / "c")
    (d / "model.safetensors").unlink()
    torch.save({"w": torch.zeros(2), "call": os.getcwd}, d / "pytorch_model.bin")  # a global: refused
    with pytest.raises(CheckpointError) as err:
        load_model(d, device="cpu")
    message = str(err.value)
    assert "not safe to load" in message and "save_file" in message and "model.safetensors" in message
    assert "weights_only=False" not in message.replace("torch.load(path, weights_only=False)", "")
    assert "Re-running" not in message and "\n" not in message
