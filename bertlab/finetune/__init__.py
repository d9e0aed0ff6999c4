"""Fine-tuning BERT on the paper's task shapes (Figure 4): sentence and pair classification,
regression, token tagging and extractive QA, fine-tuned or feature-based.

Modules, lowest first: tasks (task specs), metrics, data (readers), encoding (examples -> inputs
-> answers), models (output layers), evaluation, predict (load + predict; the saved format),
recipe (training with bertlab.training; the `bertlab finetune` CLI).
"""

from bertlab.finetune.recipe import FinetuneConfig, run_finetuning

__all__ = ["FinetuneConfig", "run_finetuning"]
