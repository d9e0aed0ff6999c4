"""bench/plateau_runs.py: held-out curves of run folders at token marks, offsets for continued runs."""

from __future__ import annotations

import json

from bench.plateau_runs import at_mark, main


def _run(folder, points, config=None):
    folder.mkdir(parents=True)
    lines = [{"split": "train", "step": 1, "tokens": 10, "mlm_acc": 0.9}]  # training batches are not held out
    lines += [{"split": "eval", "step": i, "tokens": t, "mlm_acc": a} for i, (t, a) in enumerate(points)]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    (folder / "run_config.json").write_text(json.dumps({"config": config or {}}))
    return folder


def test_curves_at_token_marks_with_a_continued_run(tmp_path, capsys):
    a = _run(
        tmp_path / "a",
        [(1_000_000, 0.10), (2_000_000, 0.12), (4_000_000, 0.21)],
        {
            "data": {"objective": "mlm", "max_seq_length": 64},
            "phase2": {"max_seq_length": 128},
            "train": {"learning_rate": 1e-3, "schedule": "wsd", "max_tokens": 4_000_000},
        },
    )
    b = _run(tmp_path / "b", [(1_000_000, 0.15)])
    assert main(["--out", str(tmp_path / "out"), f"first={a}", f"later={b}@3"]) == 0
    md = (tmp_path / "out" / "plateau.md").read_text()
    assert "| first | 10.0 | 12.0 | 21.0 |" in md  # 1M, 2M, 4M
    assert "| later |  |  | 15.0 |" in md  # 1M after 3M: drawn at 4M
    assert "mlm, lr 0.001 wsd" in md and "seq 64->128" in md
    assert json.loads((tmp_path / "out" / "plateau.json").read_text())["later"]["curve"] == [[4_000_000, 15.0]]
    assert at_mark([(1_000_000, 10.0)], 6e6) is None  # no evaluation near the mark: left blank
