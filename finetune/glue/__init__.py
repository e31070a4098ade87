"""GLUE fine-tuning: the task registry, TSV readers, metrics and the paper's hyperparameters."""
