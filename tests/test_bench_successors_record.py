"""bench/successors_record.py on a fake finished run with a tiny real model: pair tasks, latency, the CSVs."""

from __future__ import annotations

import json

import torch
from conftest import REPO, tiny_config, write_corpus

from bench.successors_record import SENTENCES, main
from bertlab.ablations.successors_record import read_record
from bertlab.model import BertForPreTraining
from bertlab.storage.checkpoint import save_checkpoint
from bertlab.training.pretrain_config import load_config_file


def test_a_finished_bert_run_is_recorded_with_its_pair_tasks_and_latency(tmp_path, tokenizer, capsys):
    runs = tmp_path / "runs"
    run = runs / "succ-bert"
    corpus = write_corpus(tmp_path / "corpus.txt", documents=40)
    cfg = load_config_file(
        REPO / "configs" / "tiny.yaml",
        [
            f"corpus=[{tmp_path / 'moved' / 'corpus.txt'}]",  # not there: --data-dir says where it is
            f"cache_dir={tmp_path / 'cache'}",
            "data.max_seq_length=32",
            "data.max_predictions_per_seq=5",
            "data.heldout_fraction=0.34",
        ],
    )
    run.mkdir(parents=True)
    (run / "run_config.json").write_text(json.dumps({"kind": "pretrain", "config": cfg.to_dict()}))
    (run / "status.json").write_text(json.dumps({"state": "finished", "step": 20, "progress": 1.0}))
    evals = [{"split": "eval", "step": s, "tokens": 100 * s, "train_s": s / 2, "mlm_acc": 0.01 * s} for s in (10, 20)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(m | {"nsp_acc": 0.6}) + "\n" for m in evals))
    torch.manual_seed(0)
    save_checkpoint(run / "model", BertForPreTraining(tiny_config(len(tokenizer))), tokenizer)

    out = tmp_path / "record"
    args = ["--runs", str(runs), "--out", str(out), "--data-dir", str(corpus.parent), "--instances", "20"]
    assert main([*args, "--latency", "--rounds", "1"]) == 0
    printed = capsys.readouterr().out
    assert "skipped roberta: no run folder" in printed and "nsp head on held-out sop instances" in printed
    row = read_record(out).row("bert")
    assert (row.tokens, row.train_s, row.task_metric, row.task_acc, row.pair_head) == (
        2000,
        10.0,
        "nsp_acc",
        0.6,
        "nsp",
    )
    assert row.nsp_instances == 20 and row.sop_instances == 20 and 0 <= row.nsp_acc <= 1 and 0 <= row.sop_acc <= 1
    assert row.latency_threads == 1 and row.latency_calls == len(SENTENCES)
    assert 0 < row.latency_p50_ms <= row.latency_p90_ms
    assert len(read_record(out).curve("bert", "mlm_acc")) == 2

    assert main(args) == 0  # again without --latency: the same run's latency is kept
    again = read_record(out).row("bert")
    assert again.latency_p50_ms == row.latency_p50_ms and again.nsp_acc == row.nsp_acc
