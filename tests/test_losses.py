"""bertlab.losses: each objective's loss, outside the model, equals the sums it should; the capped
(static-shape) slots give the same loss and counts; a compiled model has no graph break."""

from __future__ import annotations

import pytest
import torch
from conftest import tiny_config
from torch.testing import assert_close

from bertlab.errors import InputError
from bertlab.losses import LOSSES, get_loss, masked_lm, masked_lm_nsp, summarize
from bertlab.model import BertForPreTraining


def _batch(vocab: int, seed: int = 0, cap: int = 4) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (3, 12), generator=g)
    chosen = torch.rand(3, 12, generator=g) < 0.3
    chosen[:, 0] = False
    chosen &= chosen.cumsum(1) <= cap  # the masker never chooses more than the cap
    chosen[2] = False  # a row with nothing to predict
    labels = torch.where(chosen, ids, torch.full_like(ids, -100))
    mask = torch.ones_like(ids)
    mask[1, 9:] = 0  # padding
    return {"input_ids": ids, "attention_mask": mask, "mlm_labels": labels, "nsp_labels": torch.tensor([0, 1, 0])}


def test_masked_lm_nsp_is_the_sum_of_the_two_cross_entropies():
    torch.manual_seed(0)
    model = BertForPreTraining(tiny_config(50)).eval()
    batch = _batch(50)
    labels = batch["mlm_labels"]
    with torch.no_grad():
        out = masked_lm_nsp(model, batch)
        full = model(batch["input_ids"], attention_mask=batch["attention_mask"])
    mlm = torch.nn.functional.cross_entropy(full.mlm_logits[labels != -100], labels[labels != -100])
    nsp = torch.nn.functional.cross_entropy(full.nsp_logits, batch["nsp_labels"])
    assert_close(out.loss, mlm + nsp, atol=1e-5, rtol=1e-5)
    assert out.sums["mlm_count"] == int((labels != -100).sum())
    assert out.sums["nsp_count"] == 3
    assert out.sums["mlm_loss_sum"] == pytest.approx(float(mlm) * out.sums["mlm_count"], rel=1e-5)
    only_mlm = masked_lm(model, batch)  # No NSP: the NSP labels are not read
    assert "nsp_count" not in only_mlm.sums
    assert_close(only_mlm.loss, mlm, atol=1e-5, rtol=1e-5)


def test_a_model_without_nsp_head_gives_the_masked_lm_loss_only():
    model = BertForPreTraining(tiny_config(50, use_nsp_head=False)).eval()
    out = masked_lm_nsp(model, _batch(50))
    assert set(out.sums) == {"mlm_correct", "mlm_count", "mlm_loss_sum"}


def test_prediction_cap_gives_the_same_loss_and_counts_with_static_shapes():
    torch.manual_seed(0)
    model = BertForPreTraining(tiny_config(50)).eval()
    batch = _batch(50)
    free = masked_lm_nsp(model, batch)
    capped = masked_lm_nsp(model, batch, prediction_cap=4)
    assert capped.output.mlm_logits.shape == (3, 5, 50)  # (B, cap + 1, V) whatever the batch holds
    torch.testing.assert_close(capped.loss, free.loss)
    assert capped.sums["mlm_count"] == free.sums["mlm_count"] == int((batch["mlm_labels"] != -100).sum())
    assert capped.sums["mlm_correct"] == free.sums["mlm_correct"]


def test_compiled_model_has_no_graph_break_and_the_loss_trains_it():
    torch.manual_seed(0)
    model = BertForPreTraining(tiny_config(50))
    # fullgraph raises on any graph break while Dynamo traces; aot_eager traces forward and backward as
    # inductor would, without generating C++ (CI machines may have no compiler)
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    out = masked_lm_nsp(compiled, _batch(50), prediction_cap=4)
    out.loss.backward()
    assert torch.isfinite(out.loss.detach())
    assert all(p.grad is not None for p in model.bert.encoder.parameters())


def test_summarize_turns_every_part_into_rates():
    sums = {"mlm_correct": 3.0, "mlm_count": 10.0, "mlm_loss_sum": 25.0, "nsp_correct": 6.0, "nsp_count": 8.0}
    assert summarize(sums) == {"mlm_acc": 0.3, "mlm_loss": 2.5, "nsp_acc": 0.75}
    assert summarize({"rtd_correct": 1.0, "rtd_count": 0.0}) == {}  # nothing counted, no rate


def test_get_loss_names_the_known_ones():
    assert get_loss("masked_lm_nsp") is masked_lm_nsp
    with pytest.raises(InputError, match="masked_lm"):
        get_loss("sentence_order")
    assert set(LOSSES) >= {"masked_lm", "masked_lm_nsp"}
