"""bertlab.model: shapes, SDPA vs explicit path, head mask, left-to-right attention, and
parity with Hugging Face transformers on random tiny weights (both directions)."""

import pytest
import torch
from conftest import tiny_config
from torch.testing import assert_close

from bertlab.config import PRESETS, BertConfig, preset
from bertlab.losses import masked_lm_nsp
from bertlab.model import BertForPreTraining
from bertlab.storage.checkpoint import export_state_dict, load_state, normalize_keys


def _inputs(vocab, B=3, T=11, seed=1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (B, T), generator=g)
    types = torch.zeros(B, T, dtype=torch.long)
    types[:, T // 2 :] = 1
    mask = torch.ones(B, T, dtype=torch.long)
    mask[-1, -3:] = 0  # padding in the last row
    return ids, types, mask


def test_presets_follow_the_paper():
    assert (PRESETS["base"].num_layers, PRESETS["base"].hidden_size, PRESETS["base"].num_heads) == (12, 768, 12)
    assert (PRESETS["large"].num_layers, PRESETS["large"].hidden_size, PRESETS["large"].num_heads) == (24, 1024, 16)
    for c in PRESETS.values():
        assert c.intermediate_size == 4 * c.hidden_size
    with pytest.raises(ValueError, match="unknown model size"):
        preset("huge")
    with pytest.raises(ValueError, match="divisible"):
        BertConfig(hidden_size=30, num_heads=4)


def test_base_parameter_count_matches_paper():
    model = BertForPreTraining(PRESETS["base"])
    n_encoder = sum(p.numel() for p in model.bert.parameters())
    assert 109e6 < n_encoder < 110e6  # the paper's "110M"


def test_sdpa_and_explicit_paths_agree():
    torch.manual_seed(0)
    model = BertForPreTraining(tiny_config(100)).eval()
    ids, types, mask = _inputs(100)
    with torch.no_grad():
        fast = model(ids, types, mask)
        slow = model(ids, types, mask, output_attentions=True)
    keep = mask.bool()
    assert_close(fast.mlm_logits[keep], slow.mlm_logits[keep], atol=1e-5, rtol=1e-5)
    assert_close(fast.nsp_logits, slow.nsp_logits, atol=1e-5, rtol=1e-5)
    att = slow.encoder.attentions
    assert len(att) == 2 and att[0].shape == (3, 4, 11, 11)
    assert_close(att[0].sum(-1), torch.ones(3, 4, 11))
    assert att[0][-1, :, :, -3:].abs().max() < 1e-6  # nobody attends to padding


def test_head_mask_same_on_both_paths_and_changes_output():
    torch.manual_seed(0)
    model = BertForPreTraining(tiny_config(100)).eval()
    ids, types, mask = _inputs(100)
    hm = torch.ones(2, 4)
    hm[0, 1] = 0
    hm[1, 3] = 0
    with torch.no_grad():
        base = model(ids, types, mask).mlm_logits
        fast = model(ids, types, mask, head_mask=hm).mlm_logits
        slow = model(ids, types, mask, head_mask=hm, output_attentions=True)
    assert_close(fast, slow.mlm_logits, atol=1e-5, rtol=1e-5)
    assert slow.encoder.attentions[0][:, 1].abs().max() == 0
    assert (fast - base).abs().max() > 1e-4


def test_left_to_right_attention_is_causal():
    torch.manual_seed(0)
    model = BertForPreTraining(tiny_config(100, attention_direction="left_to_right")).eval()
    ids, types, mask = _inputs(100, B=1)
    mask[:] = 1
    with torch.no_grad():
        out = model(ids, types, mask, output_attentions=True)
        fast = model(ids, types, mask)
        ids2 = ids.clone()
        ids2[0, -1] = (ids2[0, -1] + 1) % 100
        changed = model(ids2, types, mask)
    assert torch.triu(out.encoder.attentions[0][0], 1).abs().max() < 1e-6
    assert_close(fast.mlm_logits, out.mlm_logits, atol=1e-5, rtol=1e-5)
    # changing the last token does not change predictions at earlier positions
    assert_close(changed.mlm_logits[0, :-1], fast.mlm_logits[0, :-1])


def test_mlm_at_selected_positions_only():
    torch.manual_seed(0)
    model = BertForPreTraining(tiny_config(100)).eval()
    ids, types, mask = _inputs(100)
    select = torch.zeros_like(ids, dtype=torch.bool)
    select[0, 2], select[2, 5] = True, True
    with torch.no_grad():
        out = model(ids, types, mask, mlm_positions=select)
        full = model(ids, types, mask).mlm_logits
    assert out.mlm_logits.shape == (2, 100)
    assert_close(out.mlm_logits, full[select], atol=1e-5, rtol=1e-5)
    assert out.mlm_slots is None  # no cap: (N, V) rows, no slots


def test_no_nsp_variant_has_no_nsp_weights():
    model = BertForPreTraining(tiny_config(100, use_nsp_head=False))
    assert not any(k.startswith("cls.seq_relationship") for k in model.state_dict())
    ids, types, mask = _inputs(100)
    assert model(ids, types, mask).nsp_logits is None


def test_decoder_tied_to_word_embeddings():
    model = BertForPreTraining(tiny_config(100))
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight


# --- parity with transformers --------------------------------------------------------------
transformers = pytest.importorskip("transformers")


def _hf_model(config: BertConfig):
    hf_cfg = transformers.BertConfig(
        **{k: v for k, v in config.to_hf_dict().items() if k not in ("architectures", "bertlab")}
    )
    return transformers.BertForPreTraining(hf_cfg).eval()


def _assert_parity(ours, theirs, vocab):
    ids, types, mask = _inputs(vocab)
    with torch.no_grad():
        a = ours(ids, types, mask, output_attentions=True, output_hidden_states=True)
        a_fast = ours(ids, types, mask)
        b = theirs(
            input_ids=ids, token_type_ids=types, attention_mask=mask, output_attentions=True, output_hidden_states=True
        )
    keep = mask.bool()
    assert_close(a.mlm_logits[keep], b.prediction_logits[keep], atol=1e-5, rtol=1e-5)
    assert_close(a_fast.mlm_logits[keep], b.prediction_logits[keep], atol=1e-5, rtol=1e-5)
    assert_close(a.nsp_logits, b.seq_relationship_logits, atol=1e-5, rtol=1e-5)
    for h1, h2 in zip(a.encoder.hidden_states, b.hidden_states, strict=True):
        assert_close(h1[keep], h2[keep], atol=1e-5, rtol=1e-5)
    for a1, a2 in zip(a.encoder.attentions, b.attentions, strict=True):
        assert_close(a1[:, :, :, :], a2, atol=1e-5, rtol=1e-5)


def test_parity_transformers_to_bertlab():
    config = tiny_config(100)
    torch.manual_seed(3)
    theirs = _hf_model(config)
    theirs.set_attn_implementation("eager")
    ours = BertForPreTraining(config).eval()
    missing = load_state(ours, normalize_keys(theirs.state_dict()), "hf")
    assert missing == []
    _assert_parity(ours, theirs, 100)


def test_parity_bertlab_to_transformers():
    config = tiny_config(100)
    torch.manual_seed(4)
    ours = BertForPreTraining(config).eval()
    theirs = _hf_model(config)
    theirs.set_attn_implementation("eager")
    result = theirs.load_state_dict(export_state_dict(ours), strict=False)
    assert not [k for k in result.missing_keys if "decoder" not in k and "position_ids" not in k]
    assert not result.unexpected_keys
    theirs.tie_weights()
    _assert_parity(ours, theirs, 100)


def test_training_gradients_match_transformers():
    """In training mode (dropout off) the loss and every parameter's gradient equal transformers'."""
    config = tiny_config(100, hidden_dropout=0.0, attention_dropout=0.0)
    torch.manual_seed(5)
    ours = BertForPreTraining(config).train()
    theirs = _hf_model(config).train()
    theirs.load_state_dict(export_state_dict(ours), strict=False)
    theirs.tie_weights()
    ids, types, mask = _inputs(100)
    labels = torch.full_like(ids, -100)
    labels[0, 2], labels[1, 4], labels[2, 5], labels[1, 9] = 7, 9, 11, 13
    nsp = torch.tensor([0, 1, 0])
    batch = {"input_ids": ids, "token_type_ids": types, "attention_mask": mask, "mlm_labels": labels, "nsp_labels": nsp}
    a = masked_lm_nsp(ours, batch)  # BERT's objective: its loss, outside the model
    b = theirs(input_ids=ids, token_type_ids=types, attention_mask=mask, labels=labels, next_sentence_label=nsp)
    assert_close(a.loss, b.loss, atol=1e-5, rtol=1e-5)
    a.loss.backward()
    b.loss.backward()
    theirs_grads = {k: p.grad for k, p in theirs.named_parameters()}
    checked = 0
    for k, p in ours.named_parameters():  # bertlab's names are transformers' names
        assert_close(p.grad, theirs_grads[k], atol=1e-5, rtol=1e-4, msg=k)
        checked += 1
    assert checked == len(theirs_grads)


def test_last_layer_at_scored_positions_only_gives_the_same_numbers():
    """Scoring some positions runs the last layer only there and at [CLS]; logits, NSP and loss
    equal the full computation, with padding, a head mask, and rows with no masked position."""
    torch.manual_seed(0)
    model = BertForPreTraining(tiny_config(100)).eval()
    ids, types, mask = _inputs(100, B=4, T=13)
    labels = torch.full_like(ids, -100)
    labels[0, 3], labels[0, 7], labels[2, 12], labels[2, 1] = 5, 6, 7, 8  # row 1 and 3: none
    head_mask = torch.ones(2, 4)
    head_mask[1, 2] = 0
    for hm in (None, head_mask):
        with torch.no_grad():
            fast = model(ids, types, mask, mlm_positions=labels != -100, head_mask=hm)
            full = model(ids, types, mask, head_mask=hm, output_hidden_states=True)  # the whole last layer
        assert fast.encoder.last_hidden_state.shape == (4, 3, 32)  # [CLS] + at most two positions
        assert_close(fast.mlm_logits, full.mlm_logits[labels != -100], atol=1e-5, rtol=1e-5)
        assert_close(fast.nsp_logits, full.nsp_logits, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="last_layer_positions"):
        model.bert(ids, types, mask, output_attentions=True, last_layer_positions=torch.zeros(4, 1, dtype=torch.long))
