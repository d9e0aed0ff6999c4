"""Making a model smaller (#55): quantization today, pruning and distillation to follow; each
command writes a model folder that opens where its source opened, and a before/after record."""
