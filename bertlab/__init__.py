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
    if name in ("load_model", "LoadedModel"):
        from bertlab import inference  # deferred: torch

        return getattr(inference, name)
    if name == "default_model_path":
        from bertlab.storage.checkpoint import default_model_path  # deferred: torch

        return default_model_path
    if name in ("BertForPreTraining", "BertModel"):
        from bertlab import model  # deferred: torch

        return getattr(model, name)
    if name == "BertTokenizer":
        from bertlab.tokenizer import BertTokenizer  # deferred: the `tokenizers` library

        return BertTokenizer
    if name == "save_checkpoint":
        from bertlab.storage.checkpoint import save_checkpoint  # deferred: torch

        return save_checkpoint
    raise AttributeError(f"module 'bertlab' has no attribute {name!r}")
