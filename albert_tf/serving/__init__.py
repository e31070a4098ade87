"""Serving: the one exporter and its contract (`export`: SavedModels; `litert`: LiteRT models) and
filling in masked words (`fill_mask`)."""
