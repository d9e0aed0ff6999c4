"""SpanBERT's span-boundary objective (data.objective=span_sbo): its masker keeps spans apart
(bertlab.data.maskers.SpanBoundaryMasker), the loss reads the spans back from the labels
(bertlab.losses.span_boundaries), the model's SBO head (bertlab.model.BertSpanBoundaryHead) gives the same
logits on the last-layer shortcut as from every position's output, and a run trains, saves and reloads it."""

from __future__ import annotations

import json
import random

import pytest
import torch
from conftest import tiny_config
from test_maskers import TEXT, _spans
from test_pretrain import _write_corpus
from torch.testing import assert_close

from bertlab.cli import main
from bertlab.config import SBO_POSITIONS, parameter_count
from bertlab.data.data_config import DataConfig
from bertlab.data.maskers import MASKERS, num_to_predict
from bertlab.errors import InputError
from bertlab.inference import load_model
from bertlab.losses import IGNORE, masked_lm_sbo, span_boundaries
from bertlab.model import BertForPreTraining
from bertlab.models import bert
from bertlab.storage import model_card
from bertlab.storage.runfolder import read_metrics
from bertlab.training.pretrain_config import load_config_file


def test_spans_never_touch_and_the_budget_is_still_met(tokenizer):
    config = DataConfig(objective="span_sbo", max_seq_length=64, max_predictions_per_seq=20, masked_lm_prob=0.15)
    masker = MASKERS["span_sbo"](tokenizer, config)
    ids = tokenizer.encode(TEXT + " " + TEXT).ids
    rng = random.Random(0)
    masked = []
    for _ in range(300):
        _, positions, _, _ = masker(ids, rng)
        runs = _spans(positions)
        assert all(b[0] - a[-1] >= 2 for a, b in zip(runs, runs[1:], strict=False))  # a gap between any two
        masked.append(len(positions))
    target = num_to_predict(len(ids), config)
    assert max(masked) <= target and sum(masked) / len(masked) >= 0.9 * target


def test_span_boundaries_from_a_hand_made_selection():
    labels = torch.full((2, 10), IGNORE)
    labels[0, [2, 3, 4, 7]] = 5  # spans 2..4 and 7
    labels[1, [1, 8]] = 6  # spans 1 and 8
    left, right, relative = span_boundaries(labels != IGNORE)
    assert left[0, [2, 3, 4, 7]].tolist() == [1, 1, 1, 6] and right[0, [2, 3, 4, 7]].tolist() == [5, 5, 5, 8]
    assert relative[0, [2, 3, 4, 7]].tolist() == [0, 1, 2, 0]
    assert left[1, [1, 8]].tolist() == [0, 7] and right[1, [1, 8]].tolist() == [2, 9] and relative[1].sum() == 0
    unselected = labels == IGNORE  # in-range filler: the position itself
    index = torch.arange(10).expand(2, 10)
    assert (left[unselected] == index[unselected]).all() and (right[unselected] == index[unselected]).all()


def _sbo_model(vocab_size: int = 40) -> BertForPreTraining:
    torch.manual_seed(0)
    return BertForPreTraining(tiny_config(vocab_size, use_nsp_head=False, span_boundary_head=True)).eval()


def _span_batch(vocab_size: int = 40) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, vocab_size, (3, 24), generator=g)
    ids[:, 0], ids[:, -1] = 2, 3  # [CLS] ... [SEP]
    labels = torch.full_like(ids, IGNORE)
    for row, spans in enumerate([[(2, 4), (9, 9)], [(5, 8)], [(1, 1), (3, 3), (20, 22)]]):
        for s, e in spans:
            labels[row, s : e + 1] = ids[row, s : e + 1]
    return ids, labels


def test_sbo_logits_on_the_shortcut_equal_a_reference_from_every_position():
    model = _sbo_model()
    ids, labels = _span_batch()
    selected = labels != IGNORE
    boundaries = span_boundaries(selected)
    with torch.no_grad():
        fast = model(ids, mlm_positions=selected, span_boundaries=boundaries)
        capped = model(ids, mlm_positions=selected, span_boundaries=boundaries, prediction_cap=8)
        full = model(ids).encoder.last_hidden_state  # (B, T, H): every position's output
        head = model.cls.span_boundary
        rows = []  # by hand, one masked token at a time: [x_{s-1}; x_{e+1}; p_{i-s}], two layers, the decoder
        for b, i in selected.nonzero().tolist():
            s = i
            while s - 1 >= 0 and selected[b, s - 1]:
                s -= 1
            e = i
            while selected[b, e + 1]:
                e += 1
            h0 = torch.cat([full[b, s - 1], full[b, e + 1], head.position_embeddings.weight[i - s]])
            y = head.output_transform(head.input_transform(h0))
            rows.append(y @ model.bert.embeddings.word_embeddings.weight.T + head.bias)
    reference = torch.stack(rows)  # (N, V)
    assert_close(fast.sbo_logits, reference, rtol=1e-4, atol=1e-5)
    positions, used = capped.mlm_slots  # (B, K): the same numbers in the capped slots
    assert_close(capped.sbo_logits[used], reference, rtol=1e-4, atol=1e-5)
    assert_close(fast.mlm_logits, model.layer_logits(full[selected]), rtol=1e-4, atol=1e-5)  # MLM unchanged
    # the encoder output holds the scored slots' rows only ([CLS] + 5 masked; capped: [CLS] + 8), not the boundaries'
    assert (
        fast.encoder.last_hidden_state.shape[1] == 6
        and capped.encoder.last_hidden_state.shape[1] == positions.shape[1] == 9
    )


def test_relative_positions_past_the_table_use_its_last_row():
    model = _sbo_model()
    hidden = torch.randn(1, 32).expand(2, 32)  # the same boundaries, two places in the span
    with torch.no_grad():
        far = model.span_boundary_logits(hidden, hidden, torch.tensor([SBO_POSITIONS - 1, SBO_POSITIONS + 5]))
    assert_close(far[0], far[1])


def test_gradients_reach_the_sbo_head_and_the_tied_embeddings():
    model = _sbo_model().train()
    ids, labels = _span_batch()
    out = masked_lm_sbo(model, {"input_ids": ids, "mlm_labels": labels}, prediction_cap=8)
    assert {"sbo_correct", "sbo_count", "sbo_loss_sum", "mlm_count"} <= set(out.sums)
    assert out.sums["sbo_count"] == out.sums["mlm_count"] == int((labels != IGNORE).sum())
    # the SBO loss alone: the word embeddings get gradient through the shared decoder
    model.zero_grad()
    sbo_only = torch.nn.functional.cross_entropy(
        out.output.sbo_logits[out.output.mlm_slots[1]], labels[labels != IGNORE]
    )
    sbo_only.backward()
    for name, p in model.cls.span_boundary.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    assert model.bert.embeddings.word_embeddings.weight.grad.abs().sum() > 0
    assert model.cls.predictions.transform.dense.weight.grad is None  # the MLM head's own layers are not in it


def test_the_sbo_heads_shapes_count_and_config_round_trip():
    config = tiny_config(50, use_nsp_head=False, span_boundary_head=True)
    model = BertForPreTraining(config)
    assert bert.expected_shapes(config) == {k: tuple(t.shape) for k, t in model.state_dict().items()}
    assert parameter_count(config) == model.num_parameters() and model.heads == ("mlm", "sbo")
    raw = config.to_hf_dict()
    assert raw["bertlab"]["span_boundary_head"] is True and type(config).from_hf_dict(raw) == config
    assert "span_boundary_head" not in tiny_config(50).to_hf_dict()["bertlab"]  # no SBO head: config.json as before
    with pytest.raises(ValueError, match="span-boundary head"):
        BertForPreTraining(tiny_config(50))(torch.ones(1, 4, dtype=torch.long), span_boundaries=(None,) * 3)


def test_only_a_family_with_the_sbo_head_trains_span_sbo():
    cfg = load_config_file(None, ["data.objective=span_sbo", "size=tiny"])
    shape = cfg.model_config(100)
    assert shape.span_boundary_head and not shape.use_nsp_head
    with pytest.raises(InputError, match="span boundary .* RoBERTa has none"):
        load_config_file(None, ["data.objective=span_sbo", "model_type=roberta"])


def test_span_sbo_pretrains_from_the_cli_and_reloads_with_its_head(tmp_path, vocab_file, capsys):
    corpus = _write_corpus(tmp_path / "corpus.txt")
    run_dir = tmp_path / "run"
    code = main(
        [
            "pretrain",
            "--run-dir",
            str(run_dir),
            "--no-progress",
            f"corpus=[{corpus}]",
            f"vocab={vocab_file}",
            f"cache_dir={tmp_path / 'cache'}",
            "data.objective=span_sbo",
            "size=tiny",
            "model_overrides={hidden_size: 32, num_layers: 2, num_heads: 2, intermediate_size: 64, "
            "max_position_embeddings: 64}",
            "data.max_seq_length=32",
            "data.dupe_factor=1",
            "eval_instances=32",
            "train.device=cpu",
            "train.batch_size=8",
            "train.max_steps=3",
            "train.log_every=1",
            "train.eval_every=0",
            "train.save_every=0",
        ]
    )
    assert code == 0, capsys.readouterr().err[-2000:]
    metrics = read_metrics(run_dir)
    train = [m for m in metrics if m["split"] == "train"]
    assert train and all("sbo_acc" in m and "sbo_loss" in m for m in train)
    assert "sbo_acc" in [m for m in metrics if m["split"] == "eval"][-1]
    saved = json.loads((run_dir / "model" / "config.json").read_text())
    assert saved["bertlab"]["span_boundary_head"] is True and saved["bertlab"]["objective"] == "span_sbo"
    lm = load_model(run_dir / "model", device="cpu")
    assert lm.heads == ("mlm", "sbo") and lm.info["missing"] == [] and lm.model.cls.span_boundary is not None
    assert lm.card["objective"] == "span_sbo" and "span-boundary" in model_card.objective_text(lm.card["objective"])


def test_a_run_recorded_before_the_sbo_field_still_matches_its_recipe():
    # the ablation suites reuse a pretraining run whose recorded settings equal the row's; runs under way
    # recorded a model_config without span_boundary_head, which they built as False
    from dataclasses import asdict

    from bertlab.ablations import reuse

    cfg = load_config_file(None, ["size=tiny"])
    now = asdict(cfg.model_config(100))
    before = {k: v for k, v in now.items() if k != "span_boundary_head"}
    assert reuse._comparable(asdict(cfg), before) == reuse._comparable(asdict(cfg), now)
    assert reuse._comparable(asdict(cfg), before) != reuse._comparable(asdict(cfg), now | {"span_boundary_head": True})
