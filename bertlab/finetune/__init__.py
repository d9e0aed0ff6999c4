"""Fine-tuning BERT on the paper's task shapes (Figure 4): sentence and pair classification,
regression, token tagging and extractive QA, fine-tuned or feature-based.

Modules, lowest first: tasks (task specs), metrics, data (readers), encoding (examples -> inputs
-> answers), models (output layers), evaluation, predict (load + predict; the saved format),
recipe (training with bertlab.training.trainer), args (the `bertlab finetune` arguments, torch-free) and
cli (the `bertlab finetune` command).

`FinetuneConfig` and `run_finetuning` load on first use, so that a torch-free submodule
(tasks, args) imports without the recipe.
"""

__all__ = ["FinetuneConfig", "run_finetuning"]


def __getattr__(name):
    if name in __all__:
        from bertlab.finetune import recipe  # deferred: torch (the recipe), kept out of `finetune.args`

        return getattr(recipe, name)
    raise AttributeError(f"module 'bertlab.finetune' has no attribute {name!r}")
