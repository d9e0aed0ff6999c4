"""What a compression starts from: a pretraining model (masked LM) or a fine-tuned sequence
classifier, behind one interface, so quantize and prune treat both alike (#55).

`open_source(path)` reads config.json and opens the folder the way its pages open it:
`bertlab.inference.load_model` for a pretraining folder, `bertlab.finetune.predict.load_finetuned`
for a classifier (a `bertlab finetune` folder of task single or pair, or a transformers
`BertForSequenceClassification`). The `Source` then measures a model of its kind (fill-mask latency
and held-out masked-LM accuracy; or classification latency and dev accuracy), wraps a compressed
module as the same kind of loaded model, and saves it in the same kind of folder, so the copy opens
where the source opened.

Imports torch, bertlab.compress.measure, bertlab.errors, bertlab.finetune (answers, predict),
bertlab.inference, bertlab.models.registry, bertlab.storage.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from bertlab.compress.measure import (
    PROBE_SENTENCE,
    Measurement,
    call_latency,
    count_parameters,
    masked_lm_accuracy,
)
from bertlab.errors import InputError
from bertlab.finetune.answers import CLASSIFIERS, answer_file
from bertlab.finetune.predict import FinetunedModel, hf_task_keys, is_finetuned_config, load_finetuned
from bertlab.inference import LoadedModel, load_model
from bertlab.models.registry import family_for
from bertlab.storage.checkpoint import read_config, resolve, save_checkpoint, weights_file
from bertlab.storage.modelfolder import weights_path

PRETRAINING, CLASSIFIER = "pretraining", "classifier"
PROBE_REVIEW = "a gripping, funny and moving film"  # what a sentiment classifier is timed and shown on


@dataclass
class Source:
    """A model folder opened for compression.

    Attributes:
        kind: "pretraining" (a masked-LM or other pretraining model) or "classifier".
        loaded: the model as its pages hold it: a `LoadedModel` or a `FinetunedModel`.
        module: the float32 CPU module to compress (`loaded.model`).
        raw_config: config.json as read.
    """

    kind: str
    loaded: LoadedModel | FinetunedModel
    raw_config: dict

    @property
    def path(self) -> str:
        return str(self.loaded.path)

    @property
    def module(self) -> nn.Module:
        return self.loaded.model

    @property
    def family(self) -> str:
        """The model family's name ("BERT", "ALBERT", ...), from config.json."""
        return family_for(self.raw_config, f"{self.path}/config.json").name

    @property
    def quantization(self) -> str | None:
        return (self.raw_config.get("bertlab") or {}).get("quantization")

    @property
    def stored_bytes(self) -> int:
        """The size of the source folder's weights file, as stored.

        Raises:
            InputError: a pair folder (ELECTRA's generator/ and discriminator/): compress one half.
        """
        halves = getattr(self.loaded, "halves", {})
        if halves:
            first = next(iter(halves.values()))
            raise InputError(
                f"{self.path} is a pair folder ({', '.join(halves)}), a model in each; compress one half, "
                f"e.g. --model {first}"
            )
        return weights_file(self.path).stat().st_size

    def wrap(self, module: nn.Module, out: str | Path, quantization: str | None = None) -> LoadedModel | FinetunedModel:
        """`module` (a compressed copy) as the same kind of loaded model as the source, at `out`."""
        if self.kind == CLASSIFIER:
            ft = self.loaded
            return FinetunedModel(module, ft.tokenizer, ft.setup, ft.card, str(out), torch.device("cpu"))
        info = {**self.loaded.info, "path": str(out), "quantization": quantization}
        return LoadedModel(module, self.loaded.tokenizer, info)

    def measure(
        self,
        model: LoadedModel | FinetunedModel,
        stored_bytes: int,
        dtype: str,
        threads: Sequence[int],
        repeats: int,
        held_out: Sequence[str] | None = None,
        dev: str | Path | None = None,
    ) -> Measurement:
        """Parameters, bytes, latency (fill-mask, or one classification) and quality of `model`:
        held-out masked-LM accuracy for a pretraining model with a masked-LM head, dev accuracy
        for a classifier given its dev file."""
        return Measurement(
            parameters=count_parameters(model.model),
            weights_bytes=stored_bytes,
            dtype=dtype,
            latency=tuple(call_latency(probe(model), n, repeats) for n in threads),
            timed=probed(model),
            mlm_accuracy=None if held_out is None or self.kind == CLASSIFIER else _mlm(model, held_out),
            dev_accuracy=None if dev is None else round(answer_file(model, dev).accuracy, 4),
        )

    def save(
        self,
        out: str | Path,
        module: nn.Module,
        extra_config: dict,
        extra_files: dict,
        dtype: torch.dtype | None = None,
        weights: dict[str, torch.Tensor] | None = None,
        hf_config: dict | None = None,
        config=None,
    ) -> Path:
        """Write `module` as the same kind of folder as the source: a pretraining folder, or a
        fine-tuned one (task keys at config.json's top level, bertlab.finetune, its model card)."""
        ours = {**(self.raw_config.get("bertlab") or {}), **extra_config, "compressed_from": self.path}
        if self.kind == PRETRAINING:
            return save_checkpoint(
                out, module, self.loaded.tokenizer, config, None, ours, extra_files, dtype, weights, hf_config
            )
        ft = self.loaded
        card = {**ft.card, "compressed_from": self.path}
        return save_checkpoint(
            out,
            module,
            ft.tokenizer,
            config or module.config,
            (self.raw_config.get("architectures") or [None])[0],  # the source's task class, as it was saved
            {**ours, "finetune": ft.setup.to_dict()},
            {"model_card.json": card, **extra_files},
            dtype,
            weights,
            {**hf_task_keys(ft.setup), **(hf_config or {})},
        )


def probe(model: LoadedModel | FinetunedModel) -> Callable[[], object]:
    """The one call a model is timed on: fill-mask of `PROBE_SENTENCE`, classifying a review, or for a
    model without a masked LM (an ELECTRA discriminator) one forward pass over `PROBE_SENTENCE`."""
    if isinstance(model, FinetunedModel):
        return lambda: model.predict(PROBE_REVIEW)
    if not model.has_mlm:
        enc = model.tokenizer.encode(PROBE_SENTENCE, max_length=model.max_length)
        ids = torch.tensor([enc.ids], device=model.device)  # (1, T)
        types = torch.tensor([enc.type_ids], device=model.device)

        def forward() -> object:
            with torch.inference_mode():
                return model.model(ids, types, torch.ones_like(ids))

        return forward
    return lambda: model.fill_mask(PROBE_SENTENCE, joint=False)


def probed(model: LoadedModel | FinetunedModel) -> str:
    """What `probe(model)` times, in words, for the tables ("fill-mask p50 / p95")."""
    if isinstance(model, FinetunedModel):
        return "classification"
    return "fill-mask" if model.has_mlm else "one forward pass"


def _mlm(model: LoadedModel, held_out: Sequence[str]) -> float | None:
    return round(masked_lm_accuracy(model, held_out), 4) if model.has_mlm else None


def is_classifier(raw_config: dict) -> bool:
    """Whether config.json is a fine-tuned model's (ours or transformers')."""
    return is_finetuned_config(raw_config)


def open_source(path_or_id: str | Path, dev: str | Path | None = None) -> Source:
    """Open a model folder (or Hub id) for compression, on the CPU in float32.

    Raises:
        InputError: a fine-tuned model that is not a sentence or pair classifier (tagging, QA,
            regression), or a dev file given for a pretraining model.
        CheckpointError: the folder is missing or incomplete, or no family opens it.
    """
    directory = resolve(path_or_id)
    raw = _raw_config(directory)
    if raw is not None and is_classifier(raw):
        ft = load_finetuned(directory, device="cpu")
        if ft.task_shape not in CLASSIFIERS:
            raise InputError(
                f"{directory} is a {ft.task_shape} model; compression takes pretraining models and sentence or pair "
                "classifiers (e.g. SST-2, MRPC)"
            )
        return Source(CLASSIFIER, ft, raw)
    if dev is not None:
        raise InputError(f"--dev is a fine-tuned classifier's dev file; {directory} is a pretraining model")
    loaded = load_model(directory, device="cpu")  # fbgemm's int8 kernels are CPU-only; compare like with like
    return Source(PRETRAINING, loaded, loaded.info.get("raw_config", {}))


def _raw_config(directory: Path) -> dict | None:
    """config.json of a folder of one model (a pair folder's is not a classifier's); None for others."""
    if weights_path(directory) is None:
        return None
    return read_config(directory)
