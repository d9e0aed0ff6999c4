"""BERT Lab: train, probe and take apart BERT.

Public API (see README):
    load_model(path_or_hub_id) -> LoadedModel with fill_mask / next_sentence / inspect / layer_predictions
    BertConfig, preset(name), BertForPreTraining, BertTokenizer, save_checkpoint
"""

from bertlab.config import PRESETS, BertConfig, preset
from bertlab.errors import BertLabError, CheckpointError, DataError, InputError

__version__ = "0.1.0"

__all__ = [
    "PRESETS",
    "BertConfig",
    "BertLabError",
    "CheckpointError",
    "DataError",
    "InputError",
    "preset",
    "load_model",
    "LoadedModel",
    "BertForPreTraining",
    "BertModel",
    "BertTokenizer",
    "save_checkpoint",
]


def __getattr__(name):  # lazy: `import bertlab` stays cheap for the CLI's --help
    if name in ("load_model", "LoadedModel", "default_model_path"):
        from bertlab import inference

        return getattr(inference, name)
    if name in ("BertForPreTraining", "BertModel"):
        from bertlab import model

        return getattr(model, name)
    if name == "BertTokenizer":
        from bertlab.tokenizer import BertTokenizer

        return BertTokenizer
    if name == "save_checkpoint":
        from bertlab.checkpoint import save_checkpoint

        return save_checkpoint
    raise AttributeError(f"module 'bertlab' has no attribute {name!r}")
