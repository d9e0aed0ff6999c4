"""bertlab.data.pretraining_data: instance statistics match the configured probabilities, and the
algorithm keeps google-research/bert's invariants."""

import hashlib
import json
import multiprocessing
import random

import numpy as np
import pytest
from conftest import WORDS

from bertlab.data.explain import explain_text
from bertlab.data.maskers import KIND_KEEP, KIND_MASK, KIND_RANDOM, Masker
from bertlab.data.pretraining_data import (
    DataConfig,
    InstanceStore,
    PretrainingBatches,
    collate,
    create_instances,
    data_cache_key,
    pack,
    truncate_seq_pair,
)
from bertlab.errors import InputError


def _token_docs(tokenizer, n_docs=40, n_sents=12, seed=0):
    """Documents whose sentences carry their document's id as a marker token, so tests can
    tell where a segment came from."""
    rng = random.Random(seed)
    ids = [tokenizer.vocab[w] for w in WORDS]
    docs = []
    for _d in range(n_docs):
        docs.append([[ids[rng.randrange(len(ids))] for _ in range(rng.randint(5, 15))] for _ in range(n_sents)])
    return docs


def _stats(instances, tokenizer):
    chosen = kinds_mask = kinds_rand = kinds_keep = real = 0
    for x in instances:
        n = len(x.input_ids)
        real += n
        chosen += len(x.masked_positions)
        kinds_mask += sum(k == KIND_MASK for k in x.mask_kinds)
        kinds_rand += sum(k == KIND_RANDOM for k in x.mask_kinds)
        kinds_keep += sum(k == KIND_KEEP for k in x.mask_kinds)
    return chosen / real, kinds_mask / chosen, kinds_rand / chosen, kinds_keep / chosen


def test_masking_statistics_match_config(tokenizer):
    docs = _token_docs(tokenizer)
    cfg = DataConfig(max_seq_length=64, dupe_factor=3, max_predictions_per_seq=64)
    instances = create_instances(docs, tokenizer, cfg, seed=1)
    share, p_mask, p_rand, p_keep = _stats(instances, tokenizer)
    assert share == pytest.approx(0.15, abs=0.01)
    assert p_mask == pytest.approx(0.8, abs=0.02)
    assert p_rand == pytest.approx(0.1, abs=0.015)
    assert p_keep == pytest.approx(0.1, abs=0.015)


@pytest.mark.parametrize("rate", [0.25, 0.4])
def test_masking_rate_changes_the_chosen_share(tokenizer, rate):
    docs = _token_docs(tokenizer)
    cfg = DataConfig(max_seq_length=64, dupe_factor=3, masked_lm_prob=rate, max_predictions_per_seq=int(64 * rate) + 1)
    share, p_mask, p_rand, p_keep = _stats(create_instances(docs, tokenizer, cfg, seed=1), tokenizer)
    assert share == pytest.approx(rate, abs=0.015)
    assert (p_mask, p_rand, p_keep) == pytest.approx((0.8, 0.1, 0.1), abs=0.03)
    capped = DataConfig(max_seq_length=64, dupe_factor=3, masked_lm_prob=rate, max_predictions_per_seq=5)
    assert _stats(create_instances(docs, tokenizer, capped, seed=1), tokenizer)[0] < 5 / 40


def test_masking_mix_is_a_config_change(tokenizer):
    docs = _token_docs(tokenizer)
    cfg = DataConfig(
        max_seq_length=64, dupe_factor=2, max_predictions_per_seq=64, mask_token_prob=0.4, random_token_prob=0.3
    )
    _, p_mask, p_rand, p_keep = _stats(create_instances(docs, tokenizer, cfg, seed=2), tokenizer)
    assert (p_mask, p_rand, p_keep) == pytest.approx((0.4, 0.3, 0.3), abs=0.03)
    with pytest.raises(InputError):
        DataConfig(mask_token_prob=0.9, random_token_prob=0.2)


def test_nsp_pairs_half_is_next_and_not_next_from_other_documents(tokenizer):
    docs = _token_docs(tokenizer, n_docs=60, n_sents=20)
    # Google's algorithm forces NotNext when a chunk holds a single segment (short targets, the
    # end of a document), so with short_seq_prob 0.1 slightly fewer than half are IsNext.
    cfg = DataConfig(max_seq_length=64, dupe_factor=2, short_seq_prob=0.0)
    instances = create_instances(docs, tokenizer, cfg, seed=3)
    is_next = [not x.is_random_next for x in instances]
    assert np.mean(is_next) == pytest.approx(0.5, abs=0.04)
    with_short = create_instances(docs, tokenizer, DataConfig(max_seq_length=64, dupe_factor=2), seed=3)
    assert 0.38 < np.mean([not x.is_random_next for x in with_short]) < 0.5
    for x in instances:
        if x.is_random_next:
            assert x.doc_b != x.doc_a
        else:
            assert x.doc_b == x.doc_a


def test_instance_invariants(tokenizer):
    docs = _token_docs(tokenizer)
    cfg = DataConfig(max_seq_length=48, dupe_factor=1)
    instances = create_instances(docs, tokenizer, cfg, seed=4)
    lengths = []
    for x in instances:
        ids = x.input_ids
        assert len(ids) <= 48
        assert ids[0] == tokenizer.cls_id and ids[-1] == tokenizer.sep_id
        assert ids[x.a_len + 1] == tokenizer.sep_id  # A ends where a_len says
        assert ids.count(tokenizer.sep_id) == 2
        for p, lab in zip(x.masked_positions, x.masked_labels, strict=False):
            assert lab not in (tokenizer.cls_id, tokenizer.sep_id)  # [CLS]/[SEP] never chosen
            assert 0 < p < len(ids) - 1
        assert x.masked_positions == sorted(x.masked_positions)
        seg = x.segment_ids
        assert seg[: x.a_len + 2] == [0] * (x.a_len + 2) and set(seg[x.a_len + 2 :]) == {1}
        lengths.append(len(ids))
    assert min(lengths) < 30  # short_seq_prob makes some short instances
    assert np.mean(np.array(lengths) >= 40) > 0.5


def test_whole_word_masking_takes_all_pieces(tokenizer):
    vocab = tokenizer.vocab
    word = [vocab["walk"], vocab["##ing"]]
    doc = [[vocab["the"], *word, vocab["to"], vocab["park"], *word] for _ in range(30)]
    cfg = DataConfig(max_seq_length=64, whole_word_mask=True, dupe_factor=1, masked_lm_prob=0.3)
    for x in create_instances([doc, doc], tokenizer, cfg, seed=5):
        pos = set(x.masked_positions)
        for p in pos:
            if x.masked_labels[x.masked_positions.index(p)] == vocab["##ing"]:
                assert p - 1 in pos  # the piece before a chosen ##ing is chosen too


def test_truncate_seq_pair_trims_longer_side():
    rng = random.Random(0)
    a, b = list(range(10)), list(range(100, 103))
    truncate_seq_pair(a, b, 8, rng)
    assert len(a) + len(b) == 8 and len(b) == 3
    assert a != list(range(5))  # trimmed from the front or back at random, not always the back


def test_deterministic_and_cache_key(tokenizer):
    docs = _token_docs(tokenizer, n_docs=10)
    cfg = DataConfig(max_seq_length=48, dupe_factor=1)
    a = pack(create_instances(docs, tokenizer, cfg, seed=7))
    b = pack(create_instances(docs, tokenizer, cfg, seed=7))
    c = pack(create_instances(docs, tokenizer, cfg, seed=8))
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["ids"], c["ids"])
    k1 = data_cache_key("fp", tokenizer, cfg, 7, "train")
    assert k1 == data_cache_key("fp", tokenizer, cfg, 7, "train")
    assert k1 != data_cache_key(
        "fp", tokenizer, DataConfig(max_seq_length=48, dupe_factor=1, masked_lm_prob=0.2), 7, "train"
    )
    assert k1 != data_cache_key("fp2", tokenizer, cfg, 7, "train")


def test_store_roundtrip_and_batches(tokenizer, tmp_path):
    docs = _token_docs(tokenizer, n_docs=12)
    cfg = DataConfig(max_seq_length=48, dupe_factor=1)
    insts = create_instances(docs, tokenizer, cfg, seed=9)
    store = InstanceStore(pack(insts))
    store.save(tmp_path / "s.npz")
    loaded = InstanceStore.load(tmp_path / "s.npz")
    assert len(loaded) == len(insts) and loaded[3] == insts[3]
    batch = collate([loaded[0], loaded[1]], cfg)
    x = loaded[0]
    assert batch["input_ids"].shape[0] == 2
    labels = batch["mlm_labels"][0]
    assert (labels != -100).sum() == len(x.masked_positions)
    assert batch["nsp_labels"][0] == int(x.is_random_next)  # 0 = IsNext
    batches = PretrainingBatches(loaded, cfg, tokenizer, batch_size=4, seed=0)
    first = [b["input_ids"] for b in batches(0)]
    again = [b["input_ids"] for b in batches(0)]
    resumed = [b["input_ids"] for b in batches(0, start=2)]
    assert all((p == q).all() for p, q in zip(first, again, strict=False))
    assert all((p == q).all() for p, q in zip(first[2:], resumed, strict=False))
    two = list(batches(0, rank=1, world=2))
    assert len(two) == batches.num_batches(2)


def _save_in_lockstep(path, arrays, start, written, errors) -> None:
    """Save `arrays` to `path`, numpy's write held until the other process has written too, so
    both have written before either renames (the interleaving that broke the shared cache)."""
    real_savez = np.savez

    def savez_then_wait(*args, **kwargs):
        real_savez(*args, **kwargs)
        written.wait(timeout=60)

    np.savez = savez_then_wait
    start.wait(timeout=60)
    try:
        InstanceStore(arrays).save(path)
    except Exception as exc:
        errors.put(f"{type(exc).__name__}: {exc}")


def test_two_processes_save_one_cache_file_at_once(tokenizer, tmp_path):
    # (#24) two ranks, or two runs with the same data settings, saving one cache file: each writes
    # its own temporary file, and both renames succeed
    store = InstanceStore(pack(create_instances(_token_docs(tokenizer, n_docs=8), tokenizer, DataConfig(), seed=1)))
    path = tmp_path / "cache" / "train-key.npz"
    ctx = multiprocessing.get_context("spawn")
    start, written, errors = ctx.Barrier(2), ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_save_in_lockstep, args=(path, store.a, start, written, errors)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    failures = [errors.get() for _ in range(errors.qsize())] if not errors.empty() else []
    assert not failures and all(p.exitcode == 0 for p in procs), failures
    loaded = InstanceStore.load(path)
    assert len(loaded) == len(store) and loaded[0] == store[0]
    assert sorted(q.name for q in path.parent.iterdir()) == ["train-key.npz"]  # no temporary file left


def test_dynamic_masking_changes_every_epoch(tokenizer):
    docs = _token_docs(tokenizer, n_docs=8)
    cfg = DataConfig(max_seq_length=48, masking="dynamic")
    insts = create_instances(docs, tokenizer, cfg, seed=1, dupe_factor=1, mask=False)
    assert all(not x.masked_positions for x in insts)
    batches = PretrainingBatches(InstanceStore(pack(insts)), cfg, tokenizer, batch_size=len(insts), seed=0)
    e0 = next(batches(0))
    e0_again = next(PretrainingBatches(InstanceStore(pack(insts)), cfg, tokenizer, batch_size=len(insts), seed=0)(0))
    e1 = next(batches(1))
    assert (e0["mlm_labels"] == e0_again["mlm_labels"]).all()
    # same instances, in another order and with other masks
    assert (e0["mlm_labels"] != -100).float().mean() == pytest.approx(0.15, abs=0.03)
    assert not (e0["mlm_labels"] == e1["mlm_labels"]).all()


def test_objectives_without_nsp(tokenizer):
    docs = _token_docs(tokenizer, n_docs=6)
    mlm = DataConfig(max_seq_length=40, objective="mlm", dupe_factor=1)
    x = create_instances(docs, tokenizer, mlm, seed=0)
    # No NSP keeps MLM + NSP's packing: [CLS] A [SEP] B [SEP] with segment B, B always the real next text
    assert all(i.input_ids.count(tokenizer.sep_id) == 2 for i in x if i.a_len + 2 < len(i.input_ids))
    assert not any(i.is_random_next for i in x) and all(i.doc_a == i.doc_b for i in x)
    batch = collate(x[:4], mlm)
    assert "nsp_labels" not in batch and int(batch["token_type_ids"].sum()) > 0
    # sentences longer than the target length still never draw B from another document
    long_docs = [[sum(doc, [])] for doc in docs]  # each document one long "sentence"
    z = create_instances(long_docs, tokenizer, mlm, seed=1)
    assert z and not any(i.is_random_next or i.doc_a != i.doc_b for i in z)
    ltr = DataConfig(max_seq_length=40, objective="ltr", dupe_factor=1)
    y = create_instances(docs, tokenizer, ltr, seed=0)
    assert all(not i.masked_positions and tokenizer.mask_id not in i.input_ids for i in y)
    b = collate(y[:1], ltr)
    n = len(y[0].input_ids)
    assert b["mlm_labels"][0, : n - 1].tolist() == y[0].input_ids[1:]  # next-token labels


def test_max_predictions_follow_the_sequence_length():
    from bertlab.data.data_config import max_predictions_for
    from bertlab.jobs.spec import pretrain_args

    assert max_predictions_for(128, 0.15) == 20 and max_predictions_for(512, 0.15) == 77  # Google's README
    assert max_predictions_for(64, 0.2) == 13 and max_predictions_for(8, 0.01) == 1
    for seq, prob in ((512, 0.15), (128, 0.2), (256, 0.5)):  # the Train page's jobs use the same rule
        assert f"data.max_predictions_per_seq={max_predictions_for(seq, prob)}" in pretrain_args(
            None, max_steps=1, max_seq_length=seq, masked_lm_prob=prob
        )


def test_masker_never_uses_specials_as_random(tokenizer):
    masker = Masker(
        tokenizer,
        DataConfig(mask_token_prob=0.0, random_token_prob=1.0, max_predictions_per_seq=100, masked_lm_prob=0.5),
    )
    ids = [tokenizer.cls_id] + [tokenizer.vocab["cat"]] * 50 + [tokenizer.sep_id]
    out, pos, labels, kinds = masker(ids, random.Random(0))
    assert all(k == KIND_RANDOM for k in kinds)
    assert not set(out[p] for p in pos) & tokenizer.special_ids
    # the documented choice (DataConfig.random_token_prob): the vocabulary minus exactly the specials
    assert set(masker.random_pool) == set(tokenizer.vocab.values()) - tokenizer.special_ids
    assert {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"} == {tokenizer.id_to_token[i] for i in tokenizer.special_ids}
    drawn = set()
    for seed in range(20):
        out, pos, _, _ = masker(ids, random.Random(seed))
        drawn |= {out[p] for p in pos}
    assert not drawn & tokenizer.special_ids and len(drawn) > len(tokenizer) // 2  # spread over the vocabulary


def test_explain_text(tokenizer):
    text = "The cat sat on the mat. The dog ran to the park. The bird sang in the tree. The sun was in the sky."
    found_not_next = found_next = False
    for seed in range(6):
        for e in explain_text(text, tokenizer, DataConfig(max_seq_length=24), seed=seed):
            assert e.tokens[0] == "[CLS]" and e.tokens[e.a_end] == "[SEP]"
            for t, o, k in zip(e.tokens, e.original_tokens, e.kinds, strict=False):
                if k == "mask":
                    assert t == "[MASK]"
                elif k == "keep":
                    assert t == o
                elif k == "":
                    assert t == o
            found_not_next |= (not e.is_next) and "NotNext" in e.reason
            found_next |= e.is_next and "IsNext" in e.reason
    assert found_next and found_not_next
    with pytest.raises(InputError):
        explain_text("   ", tokenizer)


def test_explain_text_takes_a_not_next_b_from_the_users_other_document(tokenizer):
    """Issue 25: with two documents typed, a NotNext B comes from the other one, never a built-in
    text; with one, built-in texts are the partners. No name reads like 'segment B'."""
    two = "The cat sat on the mat. The dog ran to the park.\n\nThe bird sang in the tree. The sun was in the sky."
    made = [e for seed in range(8) for e in explain_text(two, tokenizer, DataConfig(max_seq_length=24), seed=seed)]
    not_next = [e for e in made if not e.is_next]
    assert not_next and all(e.doc_b in (0, 1) and e.doc_b != e.doc_a for e in not_next)
    assert all("built-in" not in e.reason and "document B" not in e.reason for e in made)
    assert any("from your second document, not from your first document" in e.reason for e in not_next)
    one = "The cat sat on the mat. The dog ran to the park. The bird sang in the tree."
    made = [e for seed in range(8) for e in explain_text(one, tokenizer, DataConfig(max_seq_length=24), seed=seed)]
    assert any('from the built-in text "' in e.reason for e in made if not e.is_next)


def _starts(sequence: list[int], part: list[int]) -> list[int]:
    return [i for i in range(len(sequence) - len(part) + 1) if sequence[i : i + len(part)] == part]


def test_sentence_order_pairs_are_consecutive_segments_of_one_document_swapped_half_the_time(tokenizer):
    docs = _token_docs(tokenizer, n_docs=60, n_sents=20)
    cfg = DataConfig(max_seq_length=64, dupe_factor=2, objective="mlm_sop")
    instances = create_instances(docs, tokenizer, cfg, seed=3, mask=False)
    assert np.mean([x.is_swapped for x in instances]) == pytest.approx(0.5, abs=0.05)
    assert not any(x.is_random_next for x in instances) and all(x.doc_a == x.doc_b for x in instances)
    for x in instances:  # the first of the two comes first in the document (truncation may trim either end)
        a, b = x.input_ids[1 : x.a_len + 1], x.input_ids[x.a_len + 2 : -1]
        first, second = (b, a) if x.is_swapped else (a, b)
        text = [t for sentence in docs[x.doc_a] for t in sentence]
        assert any(j >= i + len(first) for i in _starts(text, first) for j in _starts(text, second))
    batch = collate(instances[:8], cfg)
    assert batch["sop_labels"].tolist() == [int(x.is_swapped) for x in instances[:8]]  # 1 = swapped
    assert "nsp_labels" not in batch and int(batch["token_type_ids"].sum()) > 0
    store = InstanceStore(pack(instances))
    assert [store[i].is_swapped for i in range(len(store))] == [x.is_swapped for x in instances]
    text = "The cat sat on the mat. The dog ran to the park. The bird sang in the tree. The sun was in the sky."
    made = [e for seed in range(6) for e in explain_text(text, tokenizer, DataConfig(objective="mlm_sop"), seed=seed)]
    assert {e.reason.split(":")[0] for e in made} == {"Swapped", "In order"}
    assert all(e.is_next == e.reason.startswith("In order") for e in made)


def test_bert_s_pairs_are_what_they_were_before_sentence_order(tokenizer):
    """MLM + NSP's and No NSP's instances hashed as the pair maker made them before sentence order
    joined it: only sentence order flips its coin."""
    docs = _token_docs(tokenizer, n_docs=20, n_sents=12)
    for objective, count, digest in (
        ("mlm_nsp", 179, "a26b807726ae50d52b2614a8122d44f22a1fb114e88d8dae7e012dad72161104"),
        ("mlm", 122, "1db3d211d5cd388e6936380be7fe3b9533e622d1d78275e58227f64b3b1d7c54"),
    ):
        made = create_instances(docs, tokenizer, DataConfig(max_seq_length=48, dupe_factor=2, objective=objective), 11)
        rows = [
            [
                x.input_ids,
                x.a_len,
                x.is_random_next,
                x.doc_a,
                x.doc_b,
                x.masked_positions,
                x.masked_labels,
                x.mask_kinds,
            ]
            for x in made
        ]
        assert len(made) == count and not any(x.is_swapped for x in made)
        assert hashlib.sha256(json.dumps(rows).encode()).hexdigest() == digest, objective
