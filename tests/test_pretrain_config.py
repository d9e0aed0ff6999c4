"""bertlab.training.pretrain_config: a config is read from YAML and overrides and checked before a run
starts (unknown keys, types, budgets, the phase2 / eval_data sections, dropout), and every shipped
config parses."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from bertlab.errors import InputError
from bertlab.training.pretrain_config import PretrainConfig, load_config_file

REPO = Path(__file__).resolve().parent.parent


def test_config_errors():
    with pytest.raises(InputError, match="unknown config keys"):
        load_config_file(None, ["nonsense=1"])
    with pytest.raises(InputError, match="unknown train keys"):
        load_config_file(None, ["train.speed=1"])
    with pytest.raises(InputError, match="section.key=value"):
        load_config_file(None, ["train.max_steps"])
    with pytest.raises(InputError, match="budget"):
        load_config_file(None, ["train.max_steps=0"])
    # an override's value is read as YAML; what is not YAML stays text and is checked as the field's type
    cfg = load_config_file(None, ["train.max_steps=7", "corpus=[a.txt, b.txt]", "name=run: {one"])
    assert cfg.train.max_steps == 7 and cfg.corpus == ("a.txt", "b.txt") and cfg.name == "run: {one"
    with pytest.raises(InputError, match="max_steps"):
        load_config_file(None, ["train.max_steps=[7"])


def test_data_sections_dropout_and_corpora_are_checked_when_read():
    with pytest.raises(InputError, match="eval_data"):
        load_config_file(None, ["eval_data={masked_lm_prob: 2.0}"])
    with pytest.raises(InputError, match="phase2"):
        load_config_file(None, ["phase2={at: 1.5, max_seq_length: 64}"])
    with pytest.raises(InputError, match="dropout"):
        load_config_file(None, ["dropout=1.5"])
    assert load_config_file(None, ["heldout_corpus=default"]).heldout_corpus == ("default",)
    cfg = load_config_file(None, ["phase2={at: 0.8, max_seq_length: 64}", "eval_data={masked_lm_prob: 0.2}"])
    first, second = cfg.phase_data()
    assert cfg.phase2_at == 0.8 and second.max_seq_length == 64 and first.max_seq_length != 64
    assert cfg.heldout_data().max_seq_length == 64 and cfg.heldout_data().masked_lm_prob == 0.2
    assert PretrainConfig.from_dict(cfg.to_dict()) == cfg  # what run_config.json keeps reads back the same


@pytest.mark.parametrize("path", sorted((REPO / "configs").rglob("*.yaml")), ids=lambda p: p.name)
def test_shipped_configs_parse(path):
    cfg = load_config_file(path)
    model_config = cfg.model_config(8192)
    assert model_config.use_nsp_head == (cfg.data.objective == "mlm_nsp")


def test_paper_size_configs_warm_up_for_one_percent():
    """Issue 12: the paper warms up for 10k of 1M steps (1%), not 10%."""
    for name in ("base.yaml", "large.yaml"):
        assert load_config_file(REPO / "configs" / name).train.warmup == 0.01, name


def test_ablation_readme_names_only_files_that_exist():
    """Issue 12: configs/ablations/README.md once pointed to a `base-recipe` file that never existed."""
    text = (REPO / "configs" / "ablations" / "README.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`(?:configs/(?:ablations/)?)?([\w.-]+\.ya?ml)`", text))
    assert named >= {"mlm_nsp.yaml", "no_nsp.yaml", "ltr.yaml", "default-model.yaml"}
    for name in named:
        assert (REPO / "configs" / "ablations" / name).is_file() or (REPO / "configs" / name).is_file(), name
    assert "base-recipe" not in text


def test_checking_a_pretraining_job_imports_no_torch():
    """`bertlab pretrain`'s arguments live here, torch-free: jobspec parses a queued job's with them."""
    code = (
        "import sys; from bertlab.jobs.spec import parse_recipe_args; "
        "ns = parse_recipe_args('pretrain', ('--config', 'c.yaml', 'train.max_steps=3')); "
        "assert ns.overrides == ['train.max_steps=3'] and ns.config == 'c.yaml'; "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_help_lists_every_key_an_override_takes():
    """`bertlab pretrain --help` named no key: users found them only through an 'unknown key' error."""
    from bertlab.training.pretrain_config import override_keys

    keys = [line.strip() for line in override_keys().splitlines() if line.startswith("  ")]
    names = {k.split("=", 1)[0] for k in keys}
    assert {"corpus", "size", "data.masked_lm_prob", "train.max_steps", "train.max_tokens"} <= names
    for item in keys:  # each listed default is a valid override as written
        name, value = item.split("=", 1)
        if name in ("vocab", "init_from", "dropout") or not value:
            continue
        load_config_file(None, [item, "train.max_steps=5"])


def test_the_help_lists_every_objective_and_family():
    from bertlab.data.objectives import OBJECTIVES
    from bertlab.models.registry import known_model_types
    from bertlab.training.pretrain_config import override_keys

    text = override_keys()
    assert all(f" - {name}: " in text for name in OBJECTIVES)
    assert all(t in text.split("model families (model_type=): ")[1] for t in known_model_types())
