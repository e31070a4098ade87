"""How much of SST-2 can words alone tell? References for experiments/glue_pretraining_helps.py.

All read the SST-2 sentences exactly as the fine-tuned models do (the first --train_examples train
rows and the full dev set, tokenized with --spm_model_file and cut to --seq_length), and each fits a
logistic regression on the train rows (the best C of a small grid, scored on dev):

- bag of pieces: the count of every vocabulary piece in the sentence. What the labelled rows teach
  a linear model with no pretraining at all; a fine-tuned encoder that scores below it has not used
  everything those rows say, whatever its start.
- bag of corpus vectors: the mean of --dim-dimensional piece vectors from the pretraining text
  (--corpus): positive pointwise mutual information of pieces within --window of each other,
  reduced by a truncated SVD (the statistics word2vec factorises implicitly). Against the mean of random
  vectors of the same size, it shows how much the corpus's co-occurrences alone say about the
  sentiment of SST-2's words.
- both: the counts and the corpus vectors' mean (standardised by the train rows) side by side. Its
  gain over the counts alone is what the corpus's word statistics add to what the labelled rows
  already say: roughly the most a model pretrained on that text can bring to these rows from its
  knowledge of single words.

Usage: python experiments/sst2_word_statistics.py [--corpus data/corpus/train.txt[,more.txt]]
           [--spm_model_file runs/demo/vocab.model] [--train_examples 4000] [--seq_length 32]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import harness  # noqa: E402  (bench/harness.py: the checkout's paths, the data folder, quiet TensorFlow)
from glue_pretraining_helps import add_comparison_arguments  # noqa: E402
from sst2_linear_probe import C_GRID, best_dev_accuracy, sst2_rows  # noqa: E402


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_comparison_arguments(parser)
    parser.add_argument("--corpus", default=str(harness.REPO / "data" / "corpus" / "train.txt"),
                        help="the pretraining text, one or more files (comma-separated)")
    parser.add_argument("--dim", type=int, default=64, help="the demo's embedding_size")
    parser.add_argument("--window", type=int, default=4)
    parser.add_argument("--seed", type=int, default=12345, help="of the random vectors")
    return parser.parse_args()


def ppmi_vectors(ids, vocab_size: int, window: int, dim: int):
    """Piece vectors from positive PMI (context counts smoothed to the power 0.75) and an SVD."""
    import numpy as np
    from scipy.sparse import coo_matrix, csr_matrix
    from scipy.sparse.linalg import svds

    rows = np.concatenate([part for d in range(1, window + 1) for part in (ids[:-d], ids[d:])])
    cols = np.concatenate([part for d in range(1, window + 1) for part in (ids[d:], ids[:-d])])
    counts = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(vocab_size, vocab_size)).tocsr().tocoo()
    total = counts.data.sum()
    row_sums = np.bincount(counts.row, counts.data, vocab_size)
    context = np.bincount(counts.col, counts.data, vocab_size) ** 0.75
    context *= total / context.sum()
    pmi = np.log(counts.data * total / (row_sums[counts.row] * context[counts.col]))
    keep = pmi > 0
    ppmi = csr_matrix((pmi[keep], (counts.row[keep], counts.col[keep])), shape=(vocab_size, vocab_size))
    u, s, _ = svds(ppmi, k=dim)
    return u * np.sqrt(s)


def main():
    args = parse_args()
    import numpy as np

    from albert_tf.tokenizers.tokenizer import AlbertTokenizer

    tokenizer = AlbertTokenizer(args.spm_model_file)
    vocab_size = tokenizer.vocab_size

    def split(name, limit=None):
        """The pieces each model reads (no [CLS], [SEP] or padding) and the labels."""
        rows = sst2_rows(tokenizer, args, name, limit)
        pieces = [[i for i in row["input_ids"] if not tokenizer.is_control(i)] for row in rows]
        return pieces, np.array([row["label_ids"] for row in rows])

    def bag_counts(pieces):
        counts = np.zeros((len(pieces), vocab_size), np.float32)
        for row, ids in enumerate(pieces):
            np.add.at(counts[row], ids, 1.0)
        return counts

    def bag_mean(pieces, vectors):
        return np.stack([vectors[ids].mean(0) if ids else np.zeros(vectors.shape[1]) for ids in pieces])

    corpus_ids = []
    for path in args.corpus.split(","):
        with open(path, encoding="utf-8", errors="replace") as f:  # statistics: a stray byte is no matter
            corpus_ids.extend(i for line in f for i in tokenizer.encode(line))
    corpus_ids = np.array(corpus_ids, np.int64)
    corpus_vectors = ppmi_vectors(corpus_ids, vocab_size, args.window, args.dim)
    random_vectors = np.random.default_rng(args.seed).normal(size=(vocab_size, args.dim))

    (train, train_y), (dev, dev_y) = split("train", args.train_examples), split("dev")
    train_counts, dev_counts = bag_counts(train), bag_counts(dev)
    train_corpus, dev_corpus = bag_mean(train, corpus_vectors), bag_mean(dev, corpus_vectors)
    mean, std = train_corpus.mean(0), train_corpus.std(0) + 1e-6
    results = {
        "bag of pieces (counts)": best_dev_accuracy(train_counts, train_y, dev_counts, dev_y, standardise=False),
        f"bag of corpus vectors (PPMI + SVD, {args.dim})": best_dev_accuracy(
            train_corpus, train_y, dev_corpus, dev_y),
        f"bag of random vectors ({args.dim})": best_dev_accuracy(
            bag_mean(train, random_vectors), train_y, bag_mean(dev, random_vectors), dev_y),
        "both: counts and corpus vectors": best_dev_accuracy(
            np.hstack([train_counts, (train_corpus - mean) / std]), train_y,
            np.hstack([dev_counts, (dev_corpus - mean) / std]), dev_y, standardise=False),
    }
    print(f"\nSST-2 from words alone: {len(train_y)} train sentences, full dev ({len(dev_y)}), sequence "
          f"{args.seq_length}, best C of {C_GRID} on dev; corpus {args.corpus} ({len(corpus_ids):,} pieces)")
    print("| features | dev accuracy |")
    print("|---|---|")
    for name, accuracy in results.items():
        print(f"| {name} | {accuracy:.4f} |")


if __name__ == "__main__":
    main()
