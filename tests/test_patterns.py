"""Sparse attention patterns (bertlab.patterns): the window and BigBird plans against dense references."""

from __future__ import annotations

import math
import subprocess
import sys
import textwrap

import pytest
import torch

from bertlab.config import BertConfig
from bertlab.model import BertForPreTraining
from bertlab.patterns.kernel import sparse_attention
from bertlab.patterns.plan import build_plan

TINY = dict(vocab_size=100, hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64, hidden_dropout=0.0)
TINY["attention_dropout"] = 0.0


def _qkv(B=2, nh=2, T=45, hs=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(B, nh, T, hs, generator=g) for _ in range(3))


def _dense(q, k, v, allowed):
    """Reference: the full score matrix with everything outside `allowed` (B, T, T) masked out."""
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    p = s.masked_fill(~allowed[:, None], float("-inf")).softmax(-1).nan_to_num(0.0)
    return p @ v, p


def _config(**kw) -> BertConfig:
    return BertConfig(**{**TINY, **kw})


@pytest.mark.parametrize("window", [2, 6, 20])
@pytest.mark.parametrize("global_tokens", ["none", "cls"])
def test_window_equals_a_dense_band_plus_global_tokens(window, global_tokens):
    q, k, v = _qkv()
    B, T = 2, q.shape[2]
    mask = torch.ones(B, T)
    mask[1, 33:] = 0  # padding
    cfg = _config(attention_pattern="window", attention_window=window, global_tokens=global_tokens)
    plan = build_plan(cfg, torch.zeros(B, T, dtype=torch.long), mask)
    context, maps = sparse_attention(q, k, v, plan, output_attentions=True)
    i = torch.arange(T)
    band = (i[:, None] - i[None]).abs() <= window // 2
    glob = torch.zeros(B, T, dtype=torch.bool)
    glob[:, 0] = global_tokens == "cls"
    real = mask.bool()
    allowed = (band[None] | glob[:, :, None] | glob[:, None, :]) & real[:, None, :] & real[:, :, None]
    ref_context, ref_maps = _dense(q, k, v, allowed)
    for b in range(B):  # padded rows are not compared (their output is never read)
        torch.testing.assert_close(context[b][:, real[b]], ref_context[b][:, real[b]], atol=2e-6, rtol=0)
    torch.testing.assert_close(maps, ref_maps, atol=1e-6, rtol=0)
    # pooled maps are the dense map's tile means (rows still sum to 1)
    plan4 = build_plan(cfg, torch.zeros(B, T, dtype=torch.long), mask, pool=4)
    _, pooled = sparse_attention(q, k, v, plan4, output_attentions=True)
    n = math.ceil(T / 4)
    padded = torch.nn.functional.pad(ref_maps, (0, 4 * n - T, 0, 4 * n - T))
    torch.testing.assert_close(pooled, padded.view(B, 2, n, 4, n, 4).sum(-1).mean(-2), atol=1e-6, rtol=0)


def test_a_window_that_covers_the_input_is_full_attention():
    torch.manual_seed(0)
    full = BertForPreTraining(_config(max_position_embeddings=64)).eval()
    win = BertForPreTraining(_config(max_position_embeddings=64, attention_pattern="window", attention_window=128))
    win.load_state_dict(full.state_dict())
    win.eval()
    ids = torch.randint(5, 100, (2, 50))
    mask = torch.ones(2, 50)
    mask[1, 40:] = 0
    a = full(ids, attention_mask=mask, output_attentions=True)
    b = win(ids, attention_mask=mask, output_attentions=True)
    torch.testing.assert_close(b.mlm_logits[0], a.mlm_logits[0], atol=1e-5, rtol=0)
    torch.testing.assert_close(b.mlm_logits[1, :40], a.mlm_logits[1, :40], atol=1e-5, rtol=0)
    for x, y in zip(a.encoder.attentions, b.encoder.attentions, strict=True):
        torch.testing.assert_close(y[0], x[0], atol=1e-6, rtol=0)
    # the pretraining path (masked positions only) and a head mask agree too
    sel = torch.zeros(2, 50, dtype=torch.bool)
    sel[:, [3, 7, 20]] = True
    heads = torch.ones(2, 4)
    heads[1, 2] = 0
    a = full(ids, attention_mask=mask, mlm_positions=sel, head_mask=heads)
    b = win(ids, attention_mask=mask, mlm_positions=sel, head_mask=heads)
    torch.testing.assert_close(b.mlm_logits, a.mlm_logits, atol=1e-5, rtol=0)


def test_a_global_token_reads_and_is_read_by_every_token():
    torch.manual_seed(0)
    model = BertForPreTraining(_config(max_position_embeddings=128, attention_pattern="window", attention_window=8))
    ids = torch.randint(5, 100, (1, 100))
    maps = model.eval()(ids, output_attentions=True).encoder.attentions
    for layer in maps:
        assert (layer[0, :, 0, :] > 0).all()  # [CLS] reads every token
        assert (layer[0, :, :, 0] > 0).all()  # every token reads [CLS]
        row = layer[0, :, 50]  # a middle token: its band (50 +- 4) and [CLS], nothing else
        reads = (row > 0).any(0).nonzero().flatten().tolist()
        assert reads == [0, *range(46, 55)]
    # a global mask given with the input (a question's tokens, say) overrides config.global_tokens
    glob = torch.zeros(1, 100, dtype=torch.long)
    glob[0, 70] = 1
    maps = model(ids, output_attentions=True, global_attention_mask=glob).encoder.attentions
    assert (maps[0][0, :, 70] > 0).all() and (maps[0][0, :, :, 70] > 0).all()
    assert (maps[0][0, :, 50, 0] == 0).all()  # [CLS] is no longer global


def test_bigbird_reads_its_window_random_and_global_blocks():
    torch.manual_seed(0)
    cfg = _config(max_position_embeddings=128, attention_pattern="bigbird", attention_block=8, random_blocks=2)
    model = BertForPreTraining(cfg).eval()
    ids = torch.randint(5, 100, (1, 96))  # 12 blocks
    out = model(ids, output_attentions=True)
    plans = model.bert.attention_plans(ids, None, None, 1)
    assert not torch.equal(plans[0].key_blocks, plans[1].key_blocks)  # random blocks differ per layer
    again = model.bert.attention_plans(ids, None, None, 1)
    assert torch.equal(plans[1].key_blocks, again[1].key_blocks)  # ... and are fixed for a given length
    for layer, plan in zip(out.encoder.attentions, plans, strict=True):
        torch.testing.assert_close(layer.sum(-1), torch.ones(1, 4, 96))
        blocks = (layer[0] > 0).any(0).view(12, 8, 12, 8).any(-1).any(1)  # (query block, key block)
        assert blocks[0].all() and blocks[-1].all() and blocks[:, 0].all() and blocks[:, -1].all()  # global
        for qb in range(1, 11):
            expected = {0, 11, qb - 1, qb, qb + 1} | set(plan.key_blocks[qb, 3:].tolist())
            assert set(blocks[qb].nonzero().flatten().tolist()) == expected
            assert len(expected) == 7 or qb in (1, 10)  # two random blocks beside the five fixed ones


def test_bad_patterns_are_refused():
    with pytest.raises(ValueError, match="attention_pattern"):
        _config(attention_pattern="dilated")
    with pytest.raises(ValueError, match="even"):
        _config(attention_pattern="window", attention_window=7)
    with pytest.raises(ValueError, match="bidirectional"):
        _config(attention_pattern="window", attention_direction="left_to_right")
    full = BertForPreTraining(_config())
    with pytest.raises(ValueError, match="sparse"):
        full(torch.ones(1, 4, dtype=torch.long), global_attention_mask=torch.ones(1, 4))


def test_the_pattern_round_trips_through_config_json():
    cfg = _config(attention_pattern="window", attention_window=64, global_tokens="none", max_position_embeddings=4096)
    assert BertConfig.from_hf_dict(cfg.to_hf_dict()) == cfg
    cfg = _config(attention_pattern="bigbird", attention_block=16, random_blocks=1)
    assert BertConfig.from_hf_dict(cfg.to_hf_dict()) == cfg
    assert "attention_pattern" not in _config().to_hf_dict()["bertlab"]  # full attention writes nothing new


_PEAK = textwrap.dedent(
    """
    import sys, torch
    from bertlab.config import BertConfig
    from bertlab.model import BertForPreTraining
    torch.set_num_threads(1)
    kw = dict(vocab_size=100, hidden_size=32, num_layers=2, num_heads=4, intermediate_size=64,
              max_position_embeddings=4096)
    if sys.argv[1] == "window":
        kw.update(attention_pattern="window", attention_window=128)
    model = BertForPreTraining(BertConfig(**kw)).eval()
    ids = torch.randint(5, 100, (1, 4096))
    def peak():  # this process's own high-water mark (ru_maxrss would carry the parent's across exec)
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    before = peak()
    with torch.no_grad():
        out = model(ids, output_attentions=True, **({"attention_pool": 16} if sys.argv[1] == "window" else {}))
    assert out.mlm_logits.shape == (1, 4096, 100)
    print(peak() - before)
    """
)


def test_a_4096_token_window_pass_needs_far_less_memory_than_full_attention_maps():
    """Full attention's maps are 4 heads x 4096^2 floats a layer; the window's are a band (and pooled)."""

    def peak_kib(kind: str) -> int:
        run = subprocess.run([sys.executable, "-c", _PEAK, kind], capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        return int(run.stdout.split()[-1])

    window, full = peak_kib("window"), peak_kib("full")
    assert full > 4 * window, (full, window)
