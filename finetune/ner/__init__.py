"""Named-entity recognition (token classification) on the shared fine-tuning layer: CoNLL readers
and tag schemes, windowed features, the task, entity-level metrics, the raw-text SavedModel and
`albert-finetune-ner`."""
