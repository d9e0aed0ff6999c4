"""bertlab.training.pair_tasks: sentence-pair heads scored on NSP and on sentence order, both ways."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
import torch
from conftest import REPO, tiny_config, write_corpus

from bertlab.data.corpus import load_corpus
from bertlab.data.pretraining_data import IN_ORDER, IS_NEXT, NOT_NEXT, SWAPPED, Instance
from bertlab.errors import InputError
from bertlab.model import BertForPreTraining
from bertlab.models import albert
from bertlab.training.pair_tasks import (
    answer_as,
    heldout_pair_instances,
    score_both_ways,
    score_pair_head,
    task_data,
)
from bertlab.training.pretrain import prepare_data
from bertlab.training.pretrain_config import load_config_file


def test_answers_read_across_tasks():
    answers = torch.tensor([0, 1, 1, 0])
    assert answer_as("nsp", "nsp", answers).tolist() == [IS_NEXT, NOT_NEXT, NOT_NEXT, IS_NEXT]
    assert answer_as("sop", "sop", answers).tolist() == [IN_ORDER, SWAPPED, SWAPPED, IN_ORDER]
    # an NSP head's IsNext is "in order"; an SOP head's "in order" is IsNext
    assert answer_as("sop", "nsp", answers).tolist() == [IN_ORDER, SWAPPED, SWAPPED, IN_ORDER]
    assert answer_as("nsp", "sop", answers).tolist() == [IS_NEXT, NOT_NEXT, NOT_NEXT, IS_NEXT]
    with pytest.raises(InputError, match="nsp, sop"):
        answer_as("rtd", "nsp", answers)


class MarkerHead(torch.nn.Module):
    """A pair head that answers index 0 when the first token of A is `marker`, else index 1 (or the
    other way round with `flip`): a head whose answers the test knows."""

    def __init__(self, head: str, marker: int, flip: bool = False):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.head, self.marker, self.flip = head, marker, flip

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, mlm_positions=None):
        first = (input_ids[:, 1] == self.marker) != self.flip  # (B,)
        logits = torch.stack([first.float(), (~first).float()], dim=-1)  # (B, 2): index 0 where marked
        return SimpleNamespace(**{f"{self.head}_logits": logits})


def hand_made(marker: int, labels: list[int], task: str) -> list[Instance]:
    """[CLS] A [SEP] B [SEP] pairs, A starting with `marker` exactly where the label is 0 (IsNext / in order)."""
    out = []
    for i, label in enumerate(labels):
        ids = [2, marker if label == 0 else 40 + i, 41, 3, 42, 43, 3]
        out.append(
            Instance(ids, 2, is_random_next=task == "nsp" and label == 1, doc_a=i, doc_b=i, is_swapped=label == 1)
        )
    return out


@pytest.mark.parametrize("head", ["nsp", "sop"])
@pytest.mark.parametrize("task", ["nsp", "sop"])
def test_label_mapping_on_hand_made_instances(head, task):
    data = load_config_file(REPO / "configs" / "tiny.yaml").data
    labels = [0, 1, 1, 0, 1, 0, 0]
    instances = hand_made(30, labels, task)
    right = score_pair_head(MarkerHead(head, 30), head, task, instances, data, pad_id=0, batch_size=3)
    assert right.accuracy == 1.0 and right.instances == 7 and right.label0_share == pytest.approx(4 / 7)
    wrong = score_pair_head(MarkerHead(head, 30, flip=True), head, task, instances, data, pad_id=0)
    assert wrong.accuracy == 0.0
    assert right.own_task == (head == task)


def test_a_model_without_the_head_is_refused():
    data = load_config_file(REPO / "configs" / "tiny.yaml").data
    with pytest.raises(InputError, match="no sop head"):
        score_pair_head(MarkerHead("nsp", 30), "sop", "nsp", hand_made(30, [0, 1], "nsp"), data, pad_id=0)
    with pytest.raises(InputError, match="no nsp instances"):
        score_pair_head(MarkerHead("nsp", 30), "nsp", "nsp", [], data, pad_id=0)


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, tokenizer):
    """A tiny run's settings, corpus and tokenizer: a third of 40 documents held out."""
    root = tmp_path_factory.mktemp("pairs")
    corpus_file = write_corpus(root / "corpus.txt", documents=40)
    cfg = load_config_file(
        REPO / "configs" / "tiny.yaml",
        [
            f"corpus=[{corpus_file}]",
            f"cache_dir={root / 'cache'}",
            "data.max_seq_length=32",
            "data.max_predictions_per_seq=5",
            "data.heldout_fraction=0.34",
            "data.short_seq_prob=0.5",
            "eval_instances=500",
        ],
    )
    return cfg, load_corpus(cfg.corpus), tokenizer


def test_heldout_instances_are_the_runs_own(tiny_run):
    cfg, corpus, tokenizer = tiny_run
    nsp = heldout_pair_instances(cfg, corpus, tokenizer, "nsp")
    _, held, _ = prepare_data(cfg, corpus, tokenizer)  # the recipe's own held-out set (mlm_nsp: configs/tiny.yaml's)
    assert [x.input_ids for x in nsp] == [held[i].input_ids for i in range(len(held))]
    sop = heldout_pair_instances(cfg, corpus, tokenizer, "sop", limit=10)
    assert len(sop) == 10 and not any(x.is_random_next for x in sop)
    assert task_data(cfg.heldout_data(), "sop").objective == "mlm_sop"
    for instances, label in (
        (nsp, "is_random_next"),
        (heldout_pair_instances(cfg, corpus, tokenizer, "sop"), "is_swapped"),
    ):
        share = sum(getattr(x, label) for x in instances) / len(instances)
        assert len(instances) >= 30 and 0.25 < share < 0.75, (label, share, len(instances))


def _forced_to_answer_0(family: str, vocab_size: int) -> tuple[torch.nn.Module, str]:
    """A tiny random model whose sentence-pair head answers index 0 whatever it reads (hand-set weights)."""
    torch.manual_seed(0)
    config = tiny_config(vocab_size, initializer_range=0.2)
    if family == "bert":
        model, head = BertForPreTraining(config), "nsp"
        layer = model.cls.seq_relationship
    else:
        fields = dataclasses.asdict(config) | {"use_nsp_head": False}
        model, head = albert.build(albert.AlbertConfig(**fields, embedding_size=16)), "sop"
        layer = model.sop_classifier.classifier
    with torch.no_grad():
        layer.weight.zero_()
        layer.bias.copy_(torch.tensor([5.0, -5.0]))
    return model.eval(), head


@pytest.mark.parametrize("family", ["bert", "albert"])
def test_a_head_that_always_answers_0_scores_about_half_both_ways(tiny_run, family):
    cfg, corpus, tokenizer = tiny_run
    model, head = _forced_to_answer_0(family, len(tokenizer))
    scores = score_both_ways(model, head, cfg, corpus, tokenizer)
    assert set(scores) == {"nsp", "sop"}
    for task, score in scores.items():
        assert score.head == head and score.task == task
        assert score.accuracy == score.label0_share, task  # IsNext / in order, every time
        assert 0.25 < score.accuracy < 0.75, (task, score)
