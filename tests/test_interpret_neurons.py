"""Feed-forward neuron factors (bertlab.interpret.neurons) on tiny models: the activations are the
intermediate layer's own output, the factorisation recovers factors built into a matrix, and bad
input is a plain InputError."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from bertlab.errors import InputError
from bertlab.inference import load_model
from bertlab.interpret.layer_views import factor_label, factor_neurons_text, factors_figure
from bertlab.interpret.neurons import Activations, ffn_activations, neuron_factors


@pytest.fixture(scope="module")
def lm(tiny_checkpoint):
    return load_model(tiny_checkpoint, device="cpu")


def test_the_activations_are_each_layers_gelu_output(lm):
    acts = ffn_activations(lm, "the cat sat on the mat .")
    enc = lm.tokenizer.encode("the cat sat on the mat .", max_length=lm.max_length)
    config = lm.model.config
    assert acts.tokens == tuple(enc.tokens)
    assert acts.values.shape == (config.num_layers, len(enc.ids), config.intermediate_size)
    out = lm.model.bert(torch.tensor([enc.ids]), torch.tensor([enc.type_ids]), output_hidden_states=True)
    for i, layer in enumerate(lm.model.bert.encoder.layer):  # the block's input is the layer's attention output
        att, _ = layer.attention(out.hidden_states[i], None, None, False)  # one text: no padding to mask
        want = F.gelu(layer.intermediate.dense(att))[0]
        assert torch.allclose(acts.values[i], want, atol=1e-5)
    assert acts.values.min() >= -0.2  # GELU's floor
    with pytest.raises(InputError, match="type a text"):
        ffn_activations(lm, "  ")


def test_a_shared_albert_gives_each_layer_its_own_activations(tiny_albert_checkpoint):
    """ALBERT's shared layers are one module run L times: row i is the i-th run's GELU output, as
    recomputed from layer i's input (its attention block, then `ffn` and the tanh GELU)."""
    albert = load_model(tiny_albert_checkpoint, device="cpu")
    layers = albert.model.bert.encoder.layer
    assert albert.config.parameter_sharing == "all" and len({id(layer) for layer in layers}) == 1
    text = "the cat sat on the mat ."
    acts = ffn_activations(albert, text)
    enc = albert.tokenizer.encode(text, max_length=albert.max_length)
    assert acts.values.shape == (albert.config.num_layers, len(enc.ids), albert.config.intermediate_size)
    with torch.no_grad():
        out = albert.model.bert(torch.tensor([enc.ids]), torch.tensor([enc.type_ids]), output_hidden_states=True)
        for i, layer in enumerate(layers):
            att, _ = layer.attention(out.hidden_states[i], None, None, False)
            want = F.gelu(layer.ffn(att), approximate=albert.config.gelu_approximation)[0]
            torch.testing.assert_close(acts.values[i], want, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(acts.values[0], acts.values[1])
    assert not albert.model.bert.encoder.layer[0].activation._forward_hooks  # read on a private copy
    assert acts.special == tuple(s is None for s in enc.sequence_ids) and acts.special[0] and acts.special[-1]


def test_the_tokenizer_s_own_special_tokens_are_left_out():
    """RoBERTa's <s> and </s> are what the tokenizer added: left out of the factors unless asked for."""
    from conftest import SAMPLE_TEXT, tiny_config

    from bertlab.inference import LoadedModel
    from bertlab.models import roberta as family
    from bertlab.models.roberta_tokenizer import RobertaTokenizer

    bpe = RobertaTokenizer.train(texts=SAMPLE_TEXT * 5, vocab_size=300)
    fields = tiny_config(len(bpe), pad_token_id=1, type_vocab_size=1).__dict__
    torch.manual_seed(0)
    roberta = LoadedModel(family.build(family.RobertaConfig(**fields)), bpe)
    acts = ffn_activations(roberta, "the cat sat on the mat .")
    assert acts.tokens[0] == "<s>" and acts.tokens[-1] == "</s>"
    factors = neuron_factors(acts, k=2)
    assert "<s>" not in factors.tokens and "</s>" not in factors.tokens
    assert len(neuron_factors(acts, k=2, special=True).tokens) == len(acts.tokens)


def test_the_factorisation_finds_factors_built_into_the_activations():
    """Two groups of neurons, each firing on its own tokens: two factors split them exactly."""
    tokens = ("[CLS]", "a", "b", "a", "b", "c", "[SEP]")
    values = torch.zeros(1, 7, 8)
    values[0, [1, 3], :4] = 1.0  # 'a' fires neurons 0-3
    values[0, [2, 4], 4:] = 2.0  # 'b' fires neurons 4-7, twice as strongly
    values[0, 5, :] = -0.1  # 'c' only GELU's negative part: counted as 0
    values[0, [0, 6], :] = 9.0  # the special tokens fire most
    nf = neuron_factors(Activations(tokens, values, tokens), k=2)
    assert nf.tokens == ("a", "b", "a", "b", "c") and nf.positions == (1, 2, 3, 4, 5) and nf.layers == (1,)
    assert nf.fit == pytest.approx(1.0, abs=1e-3)
    assert nf.strongest(0, 3) == ["b"] and nf.strongest(1, 3) == ["a"]  # the larger factor first
    assert torch.allclose(nf.strength[0], torch.tensor([0.0, 1, 0, 1, 0]), atol=1e-3)
    assert {n for _, n, _ in nf.neurons[0]} <= {4, 5, 6, 7} and {n for _, n, _ in nf.neurons[1]} <= {0, 1, 2, 3}
    assert sum(share for *_, share in nf.neurons[1][:4]) == pytest.approx(1.0, abs=1e-3)
    assert factor_label(nf, 0) == "factor 1: b" and factor_neurons_text(nf, 1).startswith("L1 #")
    with_special = neuron_factors(Activations(tokens, values, tokens), k=2, special=True)
    assert with_special.tokens == tokens and with_special.strongest(0, 1) == ["[CLS]"]
    fig = factors_figure(nf)
    assert len(fig.data[0].x) == 5 and len(set(fig.data[0].x)) == 5  # a repeated token keeps its own column


def test_bad_input_is_refused_plainly(lm):
    acts = ffn_activations(lm, "the cat sat on the mat .")
    for k in (0, 13, 2.5, True):
        with pytest.raises(InputError, match="number of factors"):
            neuron_factors(acts, k=k)
    with pytest.raises(InputError, match="counted from 1 to 2"):
        neuron_factors(acts, layers=[0])
    with pytest.raises(InputError, match="7 tokens to factorise into 8"):
        neuron_factors(acts, k=8)
    zeros = Activations(("a", "b", "c"), torch.zeros(1, 3, 4), ("a", "b", "c"))
    with pytest.raises(InputError, match="every activation is zero"):
        neuron_factors(zeros, k=2)
    assert neuron_factors(acts, k=3, layers=[2, 2]).layers == (2,)
