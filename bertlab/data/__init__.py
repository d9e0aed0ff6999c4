"""Pretraining data: raw text to documents (corpus), the objectives' specs, instances and batches."""
