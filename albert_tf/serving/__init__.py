"""Serving: the formats, precisions and their one check (`formats`, free of TensorFlow), the one
exporter and its contract (`export`: SavedModels; `litert`: LiteRT models), the map from a model to
its SavedModel that every door exports through (`task_exports`) and filling in masked words
(`fill_mask`)."""
