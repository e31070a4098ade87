"""Fine-tuning ALBERT on GLUE, SQuAD and RACE."""
