"""Corpus -> SentencePiece vocabulary -> pretraining TFRecords (masked LM + sentence order)."""
