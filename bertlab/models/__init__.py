"""Model families: the registry that finds a folder's family from config.json's `model_type`
(`registry`, torch-free) and one module per family (`bert`), imported when a model is built or loaded."""
