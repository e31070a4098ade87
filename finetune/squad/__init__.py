"""SQuAD v1.1 and v2.0 fine-tuning: readers, features, metrics, post-processing and heads."""
