"""What does a pretrained encoder know about SST-2 before fine-tuning? Linear probes on frozen features.

The encoder of a pretraining run (default: runs/demo/model, written by ./run_demo.sh) and the same
config with random weights each turn the first --train_examples SST-2 train sentences and the full
dev set into fixed features; a logistic regression (inputs standardised, the best C of a small
grid scored on dev) is fitted on the train features. Features: the mean of the embedding output
over real tokens, the mean of the last layer over real tokens, the last layer at [CLS], and the
pooled output. A pretrained encoder whose features probe worse than random ones has nothing for
fine-tuning to build on (the complement of experiments/glue_pretraining_helps.py, which fine-tunes).

Usage: python experiments/sst2_linear_probe.py [--pretrained runs/demo/model] [--spm_model_file runs/demo/vocab.model]
           [--train_examples 4000] [--seq_length 32]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import harness  # noqa: E402  (bench/harness.py: the checkout's paths, the data folder, quiet TensorFlow)
from glue_pretraining_helps import add_comparison_arguments  # noqa: E402  (the flags of the comparison)

C_GRID = (0.01, 0.1, 1.0, 10.0, 100.0)


def best_dev_accuracy(train_x, train_y, dev_x, dev_y, standardise: bool = True) -> float:
    """Dev accuracy of a logistic regression fitted on the train features, best over C_GRID (inputs
    standardised by the train features' mean and deviation unless standardise is False)."""
    from sklearn.linear_model import LogisticRegression

    if standardise:
        mean, std = train_x.mean(0), train_x.std(0) + 1e-6
        train_x, dev_x = (train_x - mean) / std, (dev_x - mean) / std
    return max(float((LogisticRegression(C=c, max_iter=2000).fit(train_x, train_y).predict(dev_x) == dev_y).mean())
               for c in C_GRID)


def sst2_rows(tokenizer, args, split: str, limit=None) -> list[dict]:
    """The first `limit` rows of an SST-2 split as the fine-tuned models read them (cut to
    args.seq_length), with their labels."""
    from finetune.glue.data import convert_examples
    from finetune.glue.readers import read_examples

    examples = read_examples("SST-2", args.data_dir, split).examples[:limit]
    return list(convert_examples(examples, "SST-2", tokenizer, args.seq_length))


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_comparison_arguments(parser)
    parser.add_argument("--seed", type=int, default=12345, help="of the random encoder's weights")
    return parser.parse_args()


def main():
    args = parse_args()
    harness.quiet_tensorflow()
    import keras
    import numpy as np

    from albert_tf import AlbertConfig, AlbertPretrainer
    from albert_tf.tokenizers.tokenizer import AlbertTokenizer
    from albert_tf.checkpoints.run_folder import load_init_checkpoint

    config = AlbertConfig.from_json_file(os.path.join(args.pretrained, "albert_config.json"))
    tokenizer = AlbertTokenizer(args.spm_model_file)

    def split(name, limit=None):
        rows = sst2_rows(tokenizer, args, name, limit)
        inputs = {key: np.array([row[key] for row in rows], np.int32)
                  for key in ("input_ids", "input_mask", "segment_ids")}
        return inputs, np.array([row["label_ids"] for row in rows])

    def features(model, inputs, batch=256):
        encoder, parts = model.encoder, {"embeddings (mean)": [], "last layer (mean)": [],
                                         "last layer at [CLS]": [], "pooled output": []}
        for start in range(0, len(inputs["input_ids"]), batch):
            chunk = {key: value[start:start + batch] for key, value in inputs.items()}
            mask = chunk["input_mask"][..., None].astype(np.float32)
            outputs = encoder(chunk)
            embedded = encoder.embeddings(chunk["input_ids"], chunk["segment_ids"]).numpy()
            sequence = outputs["sequence_output"].numpy()
            parts["embeddings (mean)"].append((embedded * mask).sum(1) / mask.sum(1))
            parts["last layer (mean)"].append((sequence * mask).sum(1) / mask.sum(1))
            parts["last layer at [CLS]"].append(sequence[:, 0])
            parts["pooled output"].append(outputs["pooled_output"].numpy())
        return {name: np.concatenate(chunks) for name, chunks in parts.items()}

    train_inputs, train_y = split("train", args.train_examples)
    dev_inputs, dev_y = split("dev")
    results = {}
    for start in ("pretrained", "random"):
        keras.utils.set_random_seed(args.seed)
        model = AlbertPretrainer(config)
        model.build()
        if start == "pretrained":
            load_init_checkpoint(model, args.pretrained)
        train_features, dev_features = features(model, train_inputs), features(model, dev_inputs)
        results[start] = {name: best_dev_accuracy(train_features[name], train_y, dev_features[name], dev_y)
                          for name in train_features}

    print(f"\nSST-2 linear probes: {len(train_y)} train sentences, full dev ({len(dev_y)}), "
          f"sequence {args.seq_length}, best C of {C_GRID} on dev; encoder {args.pretrained}")
    print("| features | pretrained | random weights |")
    print("|---|---|---|")
    for name in results["pretrained"]:
        print(f"| {name} | {results['pretrained'][name]:.4f} | {results['random'][name]:.4f} |")


if __name__ == "__main__":
    main()
