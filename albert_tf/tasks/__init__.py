"""Tasks on raw text, as keras-hub's: a preprocessor, a task model and their export in one Keras
model (`AlbertTextClassifier`; `AlbertEntityRecognizer`, named entities)."""
