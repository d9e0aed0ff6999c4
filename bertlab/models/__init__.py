"""Model families: the registry that finds a folder's family from config.json's `model_type`
(`registry`, torch-free) and one module per family (`bert`, `roberta`, ...), imported when a model is
built or loaded, with a family's own tokenizer beside it where it has one (`roberta_tokenizer`, as
transformers keeps tokenization_roberta beside modeling_roberta)."""
