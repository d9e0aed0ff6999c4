"""The shipped model answers as it did before the package was restructured (#53): fill-mask logits
and NSP logits recorded then (tests/data/shipped_model_outputs.json) are reproduced bit for bit on a
CPU of the same kind with the same number of threads (torch's default on the 2-core machine that
recorded them; the thread count changes how a matmul's sums are split, and so their last bits); on
another kind of CPU (AVX2 instead of AVX-512, say) matmuls round differently, so there the answers
must agree to 1e-5 and name the same tokens."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from bertlab.inference import load_model

RECORDED = json.loads((Path(__file__).parent / "data" / "shipped_model_outputs.json").read_text())
SAME_CPU = torch.backends.cpu.get_cpu_capability() == RECORDED["cpu_capability"]


@pytest.fixture(scope="module")
def shipped():
    threads = torch.get_num_threads()
    torch.set_num_threads(RECORDED["threads"])  # other tests may have changed it
    yield load_model()
    torch.set_num_threads(threads)


@pytest.mark.parametrize("case", RECORDED["fill_mask"], ids=lambda c: c["text"])
def test_fill_mask_is_unchanged(shipped, case):
    enc = shipped.tokenizer.encode(case["text"], max_length=shipped.max_length)
    with torch.no_grad():
        logits = shipped.model(**shipped._batch([enc])).mlm_logits.float()
    result = shipped.fill_mask(case["text"], top_k=5)
    answers = [[(c.token, c.score) for c in m.candidates] for m in result.masks]
    assert [[t for t, _ in a] for a in answers] == [[t for t, _ in a] for a in case["answers"]]
    assert result.joint_text == case["joint_text"]
    if SAME_CPU:
        assert hashlib.sha256(logits.contiguous().numpy().tobytes()).hexdigest() == case["logits_sha256"]
        assert answers == [[tuple(c) for c in a] for a in case["answers"]]
    else:
        for ours, theirs in zip(answers, case["answers"], strict=True):
            assert [s for _, s in ours] == pytest.approx([s for _, s in theirs], abs=1e-5)


@pytest.mark.parametrize("case", RECORDED["nsp"], ids=lambda c: c["b"])
def test_next_sentence_is_unchanged(shipped, case):
    enc = shipped.tokenizer.encode(case["a"], case["b"], max_length=shipped.max_length)
    with torch.no_grad():
        nsp = shipped.model(**shipped._batch([enc])).nsp_logits.float()[0].tolist()
    is_next = shipped.next_sentence(case["a"], case["b"]).is_next
    assert is_next == case["is_next"]
    if SAME_CPU:
        assert nsp == case["logits"]
    else:
        assert nsp == pytest.approx(case["logits"], abs=1e-4)
