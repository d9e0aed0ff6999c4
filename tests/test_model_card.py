"""bertlab.storage.model_card: the README.md of a checkpoint says what the model is and how it was made;
the shipped model's card and the shipped configs say what is true."""

import json
from pathlib import Path

from bertlab.storage.model_card import model_card_markdown, recipe_deviations

REPO = Path(__file__).resolve().parent.parent

PAPER_TRAIN = {
    "learning_rate": 1e-4,
    "adam_betas": [0.9, 0.999],
    "schedule": "linear",
    "batch_size": 256,
    "weight_decay": 0.01,
    "warmup": 0.01,
}
PAPER_DATA = {
    "max_seq_length": 128,
    "masked_lm_prob": 0.15,
    "masking": "static",
    "mask_token_prob": 0.8,
    "random_token_prob": 0.1,
    "dupe_factor": 10,
}


def _card(**kw) -> dict:
    card = {
        "name": "m",
        "size": "mini",
        "objective": "mlm_nsp",
        "train_config": dict(PAPER_TRAIN),
        "data_config": dict(PAPER_DATA),
        "pretrain_dropout": 0.1,
        "metrics": {"mlm_acc": 0.4},
    }
    card.update(kw)
    return card


def test_the_papers_recipe_has_no_deviations():
    assert recipe_deviations(_card()) == []


def test_each_deviation_is_named():
    card = _card(pretrain_dropout=0.0, phase2={"at": 0.75, "max_seq_length": 128})
    card["train_config"].update(learning_rate=1.5e-3, adam_betas=[0.9, 0.98], batch_size=32, warmup=0.05)
    card["data_config"].update(max_seq_length=64, masked_lm_prob=0.2, masking="dynamic")
    text = "\n".join(recipe_deviations(card))
    for fragment in (
        "0.0015",
        "0.9, 0.98",
        "batch 32",
        "5% of the budget",
        "20% of tokens",
        "dynamic masking",
        "64 tokens for the first 75%",
        "dropout 0.0",
    ):
        assert fragment in text, fragment
    assert "departs from the paper" in model_card_markdown(card)


def test_objective_is_described_as_it_was():
    assert "next sentence prediction" in model_card_markdown(_card())
    assert "No NSP ablation" in model_card_markdown(_card(objective="mlm"))
    assert "left-to-right" in model_card_markdown(_card(objective="ltr"))
    assert "next sentence prediction, as in" not in model_card_markdown(_card(objective="ltr"))


def test_learning_curve_and_unseen_english_tables():
    curve = [
        {
            "step": s,
            "tokens": 1000 * s,
            "train_s": 6.0 * s,
            "mlm_acc": s / 1000,
            "mlm_loss": 7 - s / 100,
            "nsp_acc": 0.5,
        }
        for s in range(10, 410, 10)
    ]
    unseen = {
        "data": "web text",
        "domains": {"ewt": {"mlm_acc": 0.3, "masked_tokens": 1200, "nsp_acc": 0.8}},
        "overall": {"mlm_acc": 0.3, "masked_tokens": 1200, "nsp_acc": 0.8},
    }
    text = model_card_markdown(_card(learning_curve=curve, unseen_english=unseen))
    rows = [line for line in text.splitlines() if line.startswith("| ") and "tokens |" not in line]
    assert "| 400 | 400,000 | 40 min | 40.0% |" in text and "| 10 | 10,000 |" in text
    assert len([r for r in rows if r.split("|")[1].strip().replace(",", "").isdigit()]) == 14
    assert "| ewt | 30.0% | 1,200 | 80.0% |" in text


def test_one_step_is_singular():
    assert "Trained 1 step, " in model_card_markdown(_card(steps=1, tokens=100, train_time_s=1.0))
    assert "Trained 2 steps, " in model_card_markdown(_card(steps=2, tokens=200, train_time_s=1.0))


def test_a_model_exported_over_its_parent_does_not_read_as_started_from_itself():
    lineage = {
        "init_from": "checkpoints/m",
        "init_card": {"steps": 6, "command": "bertlab pretrain ..."},
        "total_steps": 10,
    }
    text = model_card_markdown(_card(**lineage))
    assert "continued pretraining from `checkpoints/m`, which" in text
    replaced = model_card_markdown(_card(**lineage, init_from_replaced=True))
    assert "from `checkpoints/m`," not in replaced and "from `checkpoints/m` with" not in replaced
    assert "the earlier model in `checkpoints/m` (this model has since replaced it there)" in replaced


def test_the_shipped_card_speaks_to_its_users():
    """What the model is, how it was made, what it scores, its limits: no internal aims, no team's
    hardware situation, no lineage that points at the model's own folder."""
    folder = REPO / "checkpoints" / "bertlab-mini"
    card = json.loads((folder / "model_card.json").read_text())
    readme = (folder / "README.md").read_text()
    for text in (readme, json.dumps(card)):
        low = text.lower()
        for word in (
            " aim ",
            " aim:",
            "our aim",
            " we ",
            " we'",
            " our ",
            " the team",
            "we had",
            " 1 threads",
            " 1 steps",
        ):
            assert word not in low, word
    init = card.get("init_from")
    assert not init or card.get("init_from_replaced") or (REPO / init).resolve() != folder.resolve()
    assert f"Trained {card['steps']:,} steps" in readme and "Limits:" in readme
    assert card["metrics"]["mlm_acc"] == round(card["metrics"]["mlm_acc"], 4)


def test_the_shipped_configs_say_what_is_true():
    tiny = (REPO / "configs" / "tiny.yaml").read_text()
    assert "minute-scale" not in tiny and "smoke run on any laptop" not in tiny
    assert "train.max_steps=50" in tiny and "jobs estimate" in tiny  # how to make a smoke run; where to see its time
    mini = (REPO / "configs" / "mini.yaml").read_text()
    assert "Not the shipped model's recipe" in mini and "default-model.yaml" in mini
    default = (REPO / "configs" / "default-model.yaml").read_text()
    assert "843" not in default and "checkpoints/bertlab-mini" in default


def test_every_key_in_plain_words_and_commands_without_machine_paths():
    from bertlab.storage.model_card import metric_rows, runnable_command, training_rows

    card = _card(train_config={"warmup": 0.02, "learning_rate": 1e-3}, metrics={"mlm_acc": 0.3047, "nsp_acc": 0.8})
    card["data_config"] = {"masking": "dynamic", "dupe_factor": 5, "masked_lm_prob": 0.2}
    rows = dict(training_rows(card))
    assert rows["Learning-rate warm-up"] == "the first 2% of the steps" and rows["Tokens masked"] == "20% of them"
    assert "Copies of the data" not in rows  # dupe_factor means nothing under dynamic masking
    assert dict(metric_rows(card["metrics"]))["Masked words guessed right"] == "30.5%"
    assert (
        runnable_command("bertlab pretrain --run-dir /work/runs/mini x=1") == "bertlab pretrain --run-dir runs/mini x=1"
    )
    assert runnable_command("bertlab pretrain --run-dir=runs/a") == "bertlab pretrain --run-dir=runs/a"
    assert "/work/runs" not in model_card_markdown({**card, "init_card": {"command": "p --run-dir /work/runs/m"}})


def test_every_corpus_is_credited_with_its_licence():
    card = {"corpus": ["default", "sotu", "wiki_vital", "../data/corpus/gutenberg"], "corpus_credit": "gensim's sample"}
    text = model_card_markdown(card)
    assert "- `sotu`:" in text and "public domain" in text.lower()
    assert "- `wiki_vital`:" in text and "CC BY-SA 4.0" in text
    assert "Project Gutenberg" in text


def test_every_schedule_has_words_on_the_card():
    from bertlab.storage.model_card import SCHEDULE_WORDS
    from bertlab.training.types import SCHEDULES

    assert set(SCHEDULE_WORDS) == set(SCHEDULES)
