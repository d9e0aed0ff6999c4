"""The checkpoint format and the folders training writes: model folders, checkpoints, the catalog of models, Google's BERTs on the Hub, model cards, export, run folders and atomic writes."""
