"""bench/bench_long_inputs.py and bench/eval_long_mlm.py on tiny models and inputs (#56)."""

from __future__ import annotations

import math

import pytest
import torch

from bench import bench_long_inputs as bench
from bench import eval_long_mlm as ev
from bertlab.inference import load_model
from bertlab.model import BertForPreTraining
from bertlab.storage.checkpoint import save_checkpoint
from tests.conftest import CORPUS_WORDS, tiny_config, write_corpus


@pytest.fixture
def one_thread():
    """The bench runs torch on one thread (its forked children must not inherit a thread pool); put it back."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_bench_measures_every_setting_and_writes_its_results(tmp_path, monkeypatch, one_thread):
    def tiny(setting, vocab, size):
        window = {"attention_window": 16} if "attention_window" in setting.overrides else {}
        return tiny_config(vocab, max_position_embeddings=128, **{**setting.overrides, **window})

    monkeypatch.setattr(bench, "model_config", tiny)
    by_name = {s.name: s for s in bench.SETTINGS}
    settings = [by_name[bench.SDPA], by_name[bench.EXPLICIT], by_name["window 256"]]
    rows = bench.measure(settings, [32, 64], ["fp32"], rounds=1, vocab=64)
    assert {(r["setting"], r["length"]) for r in rows} == {(s.name, n) for s in settings for n in (32, 64)}
    assert all(r["forward_s"] > 0 and r["train_s"] > 0 and r["train_mb"] >= 0 for r in rows)
    rat = bench.ratios(rows)
    assert {r["setting"] for r in rat} == {settings[1].name, settings[2].name}
    grow = bench.growth(rows)
    assert all(g["n"] == 2 and not math.isnan(g["train_s"]) for g in grow)
    md = bench.markdown(rows, rat, [grow], bench.machine_facts(), "cmd", 1.0, ("1", "2"))
    assert "| window 256 | 64 | fp32 |" in md and "linear would be 2x, quadratic 4x" in md
    assert bench.plot(rows, tmp_path / "p.png").stat().st_size > 1000


def test_forked_memory_grows_with_the_explicit_score_matrix(one_thread):
    """The T x T maps of explicit full attention show in the forked child's peak memory."""
    config = tiny_config(64, max_position_embeddings=1024, num_heads=8)
    torch.manual_seed(0)
    model = BertForPreTraining(config)
    prepared = bench.Prepared(
        next(s for s in bench.SETTINGS if s.explicit), model, torch.optim.AdamW(model.parameters())
    )
    small = bench.run_forked(prepared, 128, "fp32", 64)
    large = bench.run_forked(prepared, 1024, "fp32", 64)
    # 8 heads x 1024^2 fp32 maps = 32 MB per layer; the peak held 31.6-64 MB more than at 128 tokens (a
    # full suite beside training runs measured 31.6), while everything linear in T adds under 1 MB here
    assert large["forward_mb"] > small["forward_mb"] + 24


@pytest.fixture(scope="module")
def two_models(tmp_path_factory, tokenizer):
    """A 64-token full-attention model and a 256-token windowed one with the same vocabulary."""
    root = tmp_path_factory.mktemp("long")
    torch.manual_seed(0)
    short = save_checkpoint(root / "short", BertForPreTraining(tiny_config(len(tokenizer))), tokenizer)
    long_config = tiny_config(len(tokenizer), max_position_embeddings=256, attention_pattern="window",
                              attention_window=16)  # fmt: skip
    long = save_checkpoint(root / "long", BertForPreTraining(long_config), tokenizer)
    text = write_corpus(root / "book.txt", documents=40)
    return load_model(short, device="cpu"), load_model(long, device="cpu"), text


def test_eval_scores_both_readings_on_the_same_masked_positions(two_models):
    short, long, text = two_models
    assert long.max_length == 256
    passages = ev.make_passages(short, ev.book_text(text), 256, limit=3)
    assert passages.ids.shape == (3, 256)
    assert (passages.ids[:, 0] == short.tokenizer.cls_id).all() and not passages.masked[:, [0, -1]].any()
    share = float(passages.masked.float().mean())
    assert 0.08 < share < 0.22
    results = ev.readings(short, long, passages, edges=(0, 64, 128, 256))
    assert len(results) == 3
    counts = {tuple(s.count) for s in results.values()}
    assert len(counts) == 1 and sum(next(iter(counts))) == int(passages.masked.sum())
    assert all(0 <= c <= n for s in results.values() for c, n in zip(s.correct, s.count, strict=True))
    table = ev.report(results, at=64)
    assert "0-63" in table and ">= 64" in table


def test_chunked_reading_answers_every_mask_from_one_window(two_models):
    short, _, text = two_models
    passages = ev.make_passages(short, ev.book_text(text), 256, limit=2)
    for stride in (None, 31):
        guess = ev.predict(short, passages, 64, stride)
        assert ((guess >= 0) == passages.masked).all()
    # a window covering the whole passage is one forward pass: the same answers as reading it at once
    whole = ev.predict(short, ev.Passages(passages.ids[:, :64], passages.labels[:, :64]), 64)
    out = short.model(passages.ids[:, :64], mlm_positions=passages.masked[:, :64])
    assert torch.equal(whole[passages.masked[:, :64]], out.mlm_logits.argmax(-1))


def test_windows_cover_the_text_and_end_at_its_end():
    assert ev.windows(10, 20, 5) == [0]
    assert ev.windows(100, 30, 30) == [0, 30, 60, 70]
    assert ev.windows(100, 30, 15)[-1] == 70


def test_eval_refuses_models_with_different_vocabularies(tmp_path, two_models, vocab_file):
    from bertlab.tokenizer import BertTokenizer

    short, _, _ = two_models
    words = vocab_file.read_text().splitlines() + ["zzzextra"]
    (tmp_path / "vocab.txt").write_text("\n".join(words) + "\n")
    other_tok = BertTokenizer.from_vocab(tmp_path / "vocab.txt")
    other = save_checkpoint(tmp_path / "other", BertForPreTraining(tiny_config(len(other_tok))), other_tok)
    with pytest.raises(ev.InputError, match="different vocabularies"):
        ev.check_same_vocabulary(short, load_model(other, device="cpu"))


def test_book_text_drops_the_gutenberg_licence(tmp_path):
    path = tmp_path / "book.txt"
    path.write_text("licence\n*** START OF THE PROJECT ***\n" + " ".join(CORPUS_WORDS) + "\n*** END OF IT ***\nmore")
    text = ev.book_text(path)
    assert "licence" not in text and "more" not in text and "lazy" in text
