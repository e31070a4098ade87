"""Text to ids: the Python (`tokenizer`) and in-graph (`graph_tokenizer`) SentencePiece tokenizers
on one segmentation (`segmentation`), the Keras preprocessor (`preprocessor`) and the length
buckets batches are padded to (`length_buckets`)."""
