"""bertlab.finetune.recipe end to end on tiny models and data written here: every task shape trains
through the shared trainer (loss falls, toy tasks are learnt), save -> load -> predict, exact
resume, feature-based and +BiLSTM variants, transformers parity of the saved heads (the CLI:
test_finetune_cli.py)."""

import json
import random

import pytest
import torch
from conftest import tiny_config

from bertlab.errors import BertLabError, CheckpointError, InputError
from bertlab.finetune import FinetuneConfig, run_finetuning
from bertlab.finetune.models import HeadConfig, build_task_model
from bertlab.finetune.predict import TaskSetup, load_finetuned, save_finetuned
from bertlab.storage.runfolder import read_metrics
from bertlab.training.trainer import TrainConfig

NOUNS = ["cat", "dog", "bird", "fox", "king", "queen", "man", "woman"]
PLACES = ["mat", "rug", "park", "house", "tree", "river", "city"]


# --- tiny data sets in each format ------------------------------------------------------------
def sentiment_rows(n=48, seed=0):
    """'big' means positive (1), 'small' negative (0)."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        label = i % 2
        adj = "big" if label else "small"
        noun, place = rng.choice(NOUNS), rng.choice(PLACES)
        rows.append(
            (
                rng.choice(
                    [
                        f"the {adj} {noun} sat on the {place}",
                        f"a {noun} was {adj}",
                        f"the {noun} ran to the {adj} {place}",
                    ]
                ),
                str(label),
            )
        )
    return rows


def write_sst2(folder, n=48):
    folder.mkdir(parents=True, exist_ok=True)
    rows = sentiment_rows(n)
    for name in ("train.tsv", "dev.tsv"):
        (folder / name).write_text("sentence\tlabel\n" + "".join(f"{s} \t{label}\n" for s, label in rows))
    return folder


def write_rte(folder, n=40):
    """entailment when the second sentence mentions 'red'."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(1)
    lines = ["index\tsentence1\tsentence2\tlabel"]
    for i in range(n):
        red = i % 2 == 0
        a = f"the {rng.choice(NOUNS)} sat on the {rng.choice(PLACES)}"
        b = f"it was {'red' if red else 'blue'}"
        lines.append(f"{i}\t{a}\t{b}\t{'entailment' if red else 'not_entailment'}")
    for name in ("train.tsv", "dev.tsv"):
        (folder / name).write_text("\n".join(lines) + "\n")
    return folder


def write_stsb(folder, n=40):
    folder.mkdir(parents=True, exist_ok=True)
    head = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"
    lines = [head]
    rng = random.Random(2)
    for i in range(n):
        score = 5.0 if i % 2 else 0.0
        a = f"the {'big' if score else 'small'} {rng.choice(NOUNS)}"
        lines.append(f"{i}\tmain\tf\t2012\t{i}\tnone\tnone\t{a}\tthe {rng.choice(NOUNS)}\t{score:.3f}")
    for name in ("train.tsv", "dev.tsv"):
        (folder / name).write_text("\n".join(lines) + "\n")
    return folder


POS = {"the": "DET", "a": "DET", "sat": "VERB", "ran": "VERB", "on": "ADP", "to": "ADP", "big": "ADJ", "small": "ADJ"}


def tag_sentences(n=32):
    rng = random.Random(3)
    out = []
    for _ in range(n):
        words = [
            "the",
            rng.choice(["big", "small"]),
            rng.choice(NOUNS),
            rng.choice(["sat", "ran"]),
            rng.choice(["on", "to"]),
            "the",
            rng.choice(PLACES),
        ]
        out.append(words)
    return out


def write_upos(folder):
    folder.mkdir(parents=True, exist_ok=True)
    blocks = []
    for words in tag_sentences():
        rows = [f"{i}\t{w}\t{w}\t{POS.get(w, 'NOUN')}\t_\t_\t0\tdep\t_\t_" for i, w in enumerate(words, 1)]
        blocks.append("# text = " + " ".join(words) + "\n" + "\n".join(rows) + "\n")
    for name in ("en_ewt-ud-train.conllu", "en_ewt-ud-dev.conllu"):
        (folder / name).write_text("\n".join(blocks))
    return folder


def write_ner(folder):
    """Animals are entities: 'king' / 'queen' are person, the rest O."""
    folder.mkdir(parents=True, exist_ok=True)
    blocks = []
    for words in tag_sentences():
        tags = ["B-person" if w in ("king", "queen") else "O" for w in words]
        blocks.append("\n".join(f"{w}\t{t}" for w, t in zip(words, tags, strict=False)) + "\n")
    for name in ("wnut17train.conll", "emerging.dev.conll"):
        (folder / name).write_text("\n".join(blocks))
    return folder


def write_squad(path, n=24):
    rng = random.Random(4)
    articles = []
    for i in range(n):
        noun, place = rng.choice(NOUNS), rng.choice(PLACES)
        context = f"the {noun} sat on the {place}. it was a big day."
        answer = f"the {place}"
        articles.append(
            {
                "title": f"T{i}",
                "paragraphs": [
                    {
                        "context": context,
                        "qas": [
                            {
                                "id": str(i),
                                "question": f"where did the {noun} sit?",
                                "answers": [{"text": answer, "answer_start": context.index(answer)}],
                            }
                        ],
                    }
                ],
            }
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": "1.1", "data": articles}))
    return path


def fast_train(**kw):
    base = dict(
        learning_rate=2e-3,
        warmup=0.1,
        batch_size=8,
        max_steps=40,
        log_every=5,
        eval_every=0,
        save_every=0,
        save_every_s=0,
        device="cpu",
        seed=0,
        num_threads=1,
    )
    base.update(kw)
    return TrainConfig(**base)


def finetune(tmp_path, name, task, data, model, **kw):
    train = kw.pop("train", fast_train())
    cfg = FinetuneConfig(task=task, data=str(data), model=str(model) if model else None, train=train, **kw)
    result = run_finetuning(cfg, tmp_path / name, progress_bar=False)
    losses = [r["loss"] for r in read_metrics(tmp_path / name) if r["split"] == "train"]
    return result, losses


# --- every shape trains ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def sst2_run(tmp_path_factory, tiny_checkpoint):
    tmp = tmp_path_factory.mktemp("sst2")
    result, losses = finetune(
        tmp, "run", "sst2", write_sst2(tmp / "data"), tiny_checkpoint, train=fast_train(max_steps=60)
    )
    return tmp / "run", result, losses


def test_sentiment_toy_is_learnt(sst2_run):
    run_dir, result, losses = sst2_run
    assert result.state == "finished"
    assert losses[-1] < losses[0]
    assert result.last_eval["accuracy"] >= 0.9  # dev = train here: the toy rule is learnt
    card = json.loads((run_dir / "model" / "model_card.json").read_text())
    assert card["task"] == "sst2" and card["metrics"]["accuracy"] == pytest.approx(
        result.last_eval["accuracy"], abs=1e-4
    )
    assert card["train_time_s"] >= 0 and card["base_model"].endswith("tiny")
    status = json.loads((run_dir / "status.json").read_text())
    assert status["state"] == "finished"


@pytest.mark.parametrize(
    "task,writer,metric,least",
    [
        ("rte", write_rte, "accuracy", None),
        ("stsb", write_stsb, "pearson", None),
        ("upos", write_upos, "accuracy", 0.9),
        ("ner", write_ner, "f1", None),
    ],
)
def test_each_task_trains(tmp_path, tiny_checkpoint, task, writer, metric, least):
    result, losses = finetune(tmp_path, "run", task, writer(tmp_path / "data"), tiny_checkpoint)
    assert losses[-1] < losses[0], losses
    assert metric in result.last_eval
    if least is not None:
        assert result.last_eval[metric] >= least


def test_squad_trains_on_a_demo_split(tmp_path, tiny_checkpoint):
    data = write_squad(tmp_path / "squad" / "dev-v1.1.json")
    result, losses = finetune(
        tmp_path, "run", "squad", data, tiny_checkpoint, split_dev=0.75, max_seq_length=32, doc_stride=8
    )
    assert losses[-1] < losses[0], losses
    assert set(result.last_eval) == {"f1", "exact_match"}
    card = json.loads((tmp_path / "run" / "model" / "model_card.json").read_text())
    assert card["demo_split"] is True and card["dev_examples"] == 6


def test_inputs_are_cut_to_the_pretrained_length(tmp_path, tiny_checkpoint):
    """A checkpoint whose card says it was pretrained on 24-token sequences: SQuAD's 32-token windows are cut
    to 24 (stride 12, half of it) since positions 24-31 were never trained; --untrained-positions keeps 32."""
    import shutil

    from bertlab.finetune.recipe import task_setup, trained_length
    from bertlab.storage.model_card import pretrained_length

    ckpt = tmp_path / "ckpt"
    shutil.copytree(tiny_checkpoint, ckpt)
    card = {"data_config": {"max_seq_length": 12}, "phase2": {"max_seq_length": 24}}
    (ckpt / "model_card.json").write_text(json.dumps(card))
    assert pretrained_length(card) == 24 and pretrained_length({"data_config": {"max_seq_length": 64}}) == 64
    assert pretrained_length({}) == 0  # Google's checkpoints have no card: the task's own length

    data = write_squad(tmp_path / "squad" / "dev-v1.1.json")
    kw = dict(split_dev=0.75, max_seq_length=32, doc_stride=16, train=fast_train(max_steps=2))
    finetune(tmp_path, "cut", "squad", data, ckpt, **kw)
    setup = json.loads((tmp_path / "cut" / "run_config.json").read_text())["task_setup"]
    assert (setup["max_seq_length"], setup["doc_stride"]) == (24, 12)
    finetune(tmp_path, "kept", "squad", data, ckpt, untrained_positions=True, **kw)
    setup = json.loads((tmp_path / "kept" / "run_config.json").read_text())["task_setup"]
    assert (setup["max_seq_length"], setup["doc_stride"]) == (32, 16)

    # shorter inputs than the pretrained length stay as asked; random init has no pretraining to follow
    cfg = FinetuneConfig(task="sst2", data=".", model=str(ckpt), max_seq_length=8)
    assert task_setup(cfg, ("0", "1"), HeadConfig("single", 2), 512, trained_length(cfg, ckpt)).max_seq_length == 8
    assert trained_length(FinetuneConfig(task="sst2", data=".", model=None), ckpt) == 0


def test_windows_overlap_and_a_resumed_run_keeps_the_inputs_it_began_with(tmp_path, tiny_checkpoint):
    """A long context's windows start at most half an input apart (128-token SQuAD inputs: stride 64, not the
    default 128, which would put windows back to back); --resume takes the length and stride the run saved,
    whatever the model card or the code's defaults say now."""
    from dataclasses import asdict

    from bertlab.finetune.recipe import settings_for_run, task_setup

    qa = HeadConfig("qa", 2)
    cfg = FinetuneConfig(task="squad", data=".", model=str(tiny_checkpoint), max_seq_length=128)
    assert (task_setup(cfg, (), qa, 512).max_seq_length, task_setup(cfg, (), qa, 512).doc_stride) == (128, 64)
    assert task_setup(FinetuneConfig(task="squad", data=".", max_seq_length=384), (), qa, 512).doc_stride == 128
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    saved = {"kind": "finetune", "config": asdict(cfg), "task_setup": {"max_seq_length": 384, "doc_stride": 128}}
    (run_dir / "run_config.json").write_text(json.dumps(saved))
    resumed = settings_for_run(cfg, run_dir, resume=True, dry_run=False)
    assert (resumed.max_seq_length, resumed.doc_stride, resumed.untrained_positions) == (384, 128, True)
    (run_dir / "checkpoint").mkdir()  # the folder holds a run: a dry run must not write over it either
    with pytest.raises(InputError, match="already holds a run"):
        settings_for_run(cfg, run_dir, resume=False, dry_run=True)
    with pytest.raises(InputError, match="leave out --resume"):  # its one step would mark the run finished
        settings_for_run(cfg, run_dir, resume=True, dry_run=True)


def test_random_init_trains_its_own_vocabulary(tmp_path):
    result, losses = finetune(
        tmp_path,
        "run",
        "sst2",
        write_sst2(tmp_path / "data", 16),
        None,
        size="tiny",
        vocab_size=200,
        train=fast_train(max_steps=3),
    )
    assert result.state == "finished"
    assert (tmp_path / "run" / "vocab.txt").is_file()
    assert (
        json.loads((tmp_path / "run" / "model" / "model_card.json").read_text())["base_model"] == "random init (tiny)"
    )


# --- prediction ----------------------------------------------------------------------------------
def test_save_load_predict_roundtrip(sst2_run):
    run_dir, result, _ = sst2_run
    m = load_finetuned(run_dir / "model", device="cpu")
    assert (m.task, m.task_shape, m.labels) == ("sst2", "single", ["0", "1"])
    rows = sentiment_rows()
    preds = [m.predict(s) for s, _ in rows]
    accuracy = sum(p.label == gold for p, (_, gold) in zip(preds, rows, strict=False)) / len(rows)
    assert accuracy == pytest.approx(result.last_eval["accuracy"])  # the same model, the same answers
    p = preds[0]
    assert sum(p.probabilities.values()) == pytest.approx(1.0)
    assert p.score == pytest.approx(max(p.probabilities.values()))
    assert p.tokens is None and p.answer is None
    for bad in ("", "   "):
        with pytest.raises(InputError, match="empty"):
            m.predict(bad)
    with pytest.raises(InputError, match="one sentence"):
        m.predict("the cat", "the dog")
    with pytest.raises(InputError, match="string"):
        m.predict(None)


def test_pair_tagging_and_qa_predictions(tmp_path, tiny_checkpoint):
    finetune(tmp_path, "rte", "rte", write_rte(tmp_path / "rte"), tiny_checkpoint, train=fast_train(max_steps=2))
    rte = load_finetuned(tmp_path / "rte" / "model", device="cpu")
    assert rte.task_shape == "pair"
    assert rte.predict("the cat sat", "it was red").label in rte.labels
    with pytest.raises(InputError, match="text_b"):
        rte.predict("the cat sat")

    finetune(tmp_path, "upos", "upos", write_upos(tmp_path / "upos"), tiny_checkpoint)
    upos = load_finetuned(tmp_path / "upos" / "model", device="cpu")
    p = upos.predict("the big cat sat on the mat.")
    assert p.tokens == ["the", "big", "cat", "sat", "on", "the", "mat", "."]
    assert len(p.tags) == len(p.tokens) and p.tags[0] == "DET" and p.tags[3] == "VERB"

    data = write_squad(tmp_path / "squad" / "dev-v1.1.json")
    finetune(
        tmp_path,
        "squad",
        "squad",
        data,
        tiny_checkpoint,
        split_dev=0.75,
        max_seq_length=32,
        doc_stride=8,
        train=fast_train(max_steps=2),
    )
    qa = load_finetuned(tmp_path / "squad" / "model", device="cpu")
    assert qa.task_shape == "qa" and qa.labels == []
    context = "the dog sat on the rug. it was a big day. " * 4  # several windows at 32 tokens
    p = qa.predict("where did the dog sit?", context)
    assert p.answer == context[p.answer_start : p.answer_end]
    assert p.windows > 1 and not p.truncated and 0 <= p.score <= 1
    with pytest.raises(InputError, match="context"):
        qa.predict("where?")


def test_regression_prediction_is_a_score(tmp_path, tiny_checkpoint):
    finetune(tmp_path, "stsb", "stsb", write_stsb(tmp_path / "stsb"), tiny_checkpoint, train=fast_train(max_steps=2))
    m = load_finetuned(tmp_path / "stsb" / "model", device="cpu")
    p = m.predict("the big cat", "the dog")
    assert m.task_shape == "regression" and p.label is None and isinstance(p.score, float)
    cfg = json.loads((tmp_path / "stsb" / "model" / "config.json").read_text())
    assert cfg["problem_type"] == "regression" and cfg["num_labels"] == 1


def test_loading_a_pretraining_checkpoint_for_prediction_is_a_clear_error(tiny_checkpoint):
    with pytest.raises(CheckpointError, match="not a fine-tuned model"):
        load_finetuned(tiny_checkpoint, device="cpu")


# --- resume ----------------------------------------------------------------------------------------
def test_resume_matches_uninterrupted(tmp_path, tiny_checkpoint):
    data = write_sst2(tmp_path / "data", 40)
    train = fast_train(max_steps=12, log_every=1)
    cfg = FinetuneConfig(task="sst2", data=str(data), model=str(tiny_checkpoint), train=train)
    full = run_finetuning(cfg, tmp_path / "full", progress_bar=False)
    part = run_finetuning(cfg, tmp_path / "part", progress_bar=False, stop_after_steps=7)  # crosses an epoch
    assert part.state == "cancelled" and part.progress.step == 7
    resumed = run_finetuning(cfg, tmp_path / "part", resume=True, progress_bar=False)
    assert resumed.progress.step == full.progress.step == 12
    loss = lambda d: {r["step"]: r["loss"] for r in read_metrics(d) if r["split"] == "train"}  # noqa: E731
    torch.testing.assert_close(loss(tmp_path / "part")[12], loss(tmp_path / "full")[12])
    a = load_finetuned(tmp_path / "full" / "model", device="cpu").model.state_dict()
    b = load_finetuned(tmp_path / "part" / "model", device="cpu").model.state_dict()
    for k in a:
        torch.testing.assert_close(a[k], b[k], msg=k)
    assert resumed.last_eval == full.last_eval


# --- feature-based and + BiLSTM ------------------------------------------------------------------
def test_feature_mode_freezes_the_encoder_and_learns_the_mix(tmp_path, tiny_checkpoint):
    from bertlab.storage.checkpoint import read_weights

    result, losses = finetune(
        tmp_path,
        "run",
        "ner",
        write_ner(tmp_path / "data"),
        tiny_checkpoint,
        mode="feature",
        features="mix",
        lstm_hidden=16,
        train=fast_train(learning_rate=1e-2),
    )
    assert losses[-1] < losses[0]
    trained = read_weights(tmp_path / "run" / "model")
    original = read_weights(tiny_checkpoint)
    for k in ("bert.embeddings.word_embeddings.weight", "bert.encoder.layer.1.output.dense.weight"):
        torch.testing.assert_close(trained[k], original[k])  # frozen
    assert not torch.equal(trained["layer_features.weights"], torch.zeros(3))  # the scalar mix learnt
    assert any(k.startswith("lstm.") for k in trained)  # feature-based tagging runs a BiLSTM
    m = load_finetuned(tmp_path / "run" / "model", device="cpu")
    assert m.setup.head.mode == "feature" and len(m.predict("the king sat").tags) == 3


def test_finetune_with_bilstm_trains_and_reloads(tmp_path, tiny_checkpoint):
    result, losses = finetune(
        tmp_path,
        "run",
        "sst2",
        write_sst2(tmp_path / "data"),
        tiny_checkpoint,
        bilstm=True,
        lstm_hidden=16,
        lstm_layers=1,
    )
    assert losses[-1] < losses[0]
    m = load_finetuned(tmp_path / "run" / "model", device="cpu")
    assert m.model.lstm is not None
    rows = sentiment_rows()
    acc = sum(m.predict(s).label == g for s, g in rows) / len(rows)
    assert acc == pytest.approx(result.last_eval["accuracy"])


# --- transformers parity ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "shape,labels,auto",
    [
        ("single", ("negative", "positive"), "AutoModelForSequenceClassification"),
        ("regression", ("score",), "AutoModelForSequenceClassification"),
        ("tagging", ("O", "B-person", "I-person"), "AutoModelForTokenClassification"),
        ("qa", (), "AutoModelForQuestionAnswering"),
    ],
)
def test_saved_heads_open_in_transformers_with_equal_logits(tmp_path, tokenizer, shape, labels, auto):
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    head = HeadConfig(shape, 2 if shape == "qa" else len(labels))
    model = build_task_model(tiny_config(len(tokenizer)), head).eval()
    with torch.no_grad():  # non-trivial head weights
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.02)
    save_finetuned(tmp_path / "m", model, tokenizer, TaskSetup("t", shape, labels, head))
    hf = getattr(transformers, auto).from_pretrained(tmp_path / "m").eval()
    if labels and shape != "qa":
        assert hf.config.id2label == dict(enumerate(labels)) and hf.config.num_labels == len(labels)
    ids = torch.tensor([[2, 10, 11, 12, 3, 13, 14, 3, 0, 0]])
    types = torch.tensor([[0, 0, 0, 0, 0, 1, 1, 1, 0, 0]])
    mask = (ids != 0).long()
    with torch.no_grad():
        ours = model(ids, types, mask)
        theirs = hf(input_ids=ids, token_type_ids=types, attention_mask=mask)
    if shape == "qa":
        torch.testing.assert_close(ours.start_logits, theirs.start_logits, atol=1e-5, rtol=0)
        torch.testing.assert_close(ours.end_logits, theirs.end_logits, atol=1e-5, rtol=0)
    else:
        torch.testing.assert_close(ours.logits, theirs.logits, atol=1e-5, rtol=0)


def test_a_transformers_finetuned_model_loads_for_prediction(tmp_path, tokenizer):
    transformers = pytest.importorskip("transformers")
    cfg = transformers.BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        id2label={0: "neg", 1: "pos"},
        label2id={"neg": 0, "pos": 1},
    )
    torch.manual_seed(0)
    hf = transformers.BertForSequenceClassification(cfg).eval()
    hf.save_pretrained(tmp_path / "hf")
    tokenizer.save(tmp_path / "hf")
    m = load_finetuned(tmp_path / "hf", device="cpu")
    assert (m.task, m.task_shape, m.labels) == ("custom", "pair", ["neg", "pos"])
    p = m.predict("the cat sat")
    enc = tokenizer.encode("the cat sat")
    with torch.no_grad():
        probs = hf(input_ids=torch.tensor([enc.ids])).logits.softmax(-1)[0]
    assert p.probabilities["pos"] == pytest.approx(float(probs[1]), abs=1e-5)


def test_a_finetuning_run_that_fails_while_preparing_is_marked_failed(tmp_path):
    cfg = FinetuneConfig(
        task="sst2", data=str(tmp_path / "no-such-folder"), train=TrainConfig(max_steps=1, eval_every=0, save_every=0)
    )
    with pytest.raises(BertLabError):
        run_finetuning(cfg, tmp_path / "run", progress_bar=False)
    status = json.loads((tmp_path / "run" / "status.json").read_text())
    assert status["state"] == "failed" and "no-such-folder" in status["error"]


def test_the_majority_share_is_what_always_answering_the_commonest_label_scores():
    from bertlab.finetune.data import SequenceExample
    from bertlab.finetune.recipe import majority_share

    examples = [SequenceExample("a", None, "1")] * 444 + [SequenceExample("b", None, "0")] * 428
    assert majority_share(examples) == pytest.approx(444 / 872)
    assert majority_share([]) is None
