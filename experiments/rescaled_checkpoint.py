"""Does a pretrained start fine-tune better once its embeddings are scaled back to their initial
size? This writes that start: a copy of a pretraining checkpoint with the embeddings scaled back.

LAMB's steps are a fixed fraction of each variable's norm, so a long pretraining run at a high rate
lets the embeddings grow (the wikitext run of experiments/sop_vs_nsp.py: standard deviation 0.19 after
9,000 steps at 0.01, from 0.02). AdamW's fine-tuning steps are absolute, so large embeddings then
move little, relatively, and the pretrained start fits its task more slowly than random weights.
The word, position and token-type embeddings are summed into a LayerNorm, so multiplying all three
by one factor leaves the encoder's outputs unchanged; this script does that, down to a standard
deviation of --target_stddev for the word embeddings, checks the outputs on a random batch, and
writes a checkpoint that `--init_checkpoint` / experiments/glue_pretraining_helps.py `--pretrained` read.

Usage: python experiments/rescaled_checkpoint.py --checkpoint runs/demo/model --output_dir /tmp/demo_rescaled
           [--target_stddev 0.02]
"""

import argparse
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import harness  # noqa: E402  (bench/harness.py: the checkout's paths, the data folder, quiet TensorFlow)

EMBEDDINGS = ("word_embeddings", "position_embeddings", "token_type_embeddings")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", required=True, help="an albert-pretrain output_dir")
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--target_stddev", type=float, default=None,
                        help="default: the config's initializer_range")
    return parser.parse_args()


def main():
    args = parse_args()
    harness.quiet_tensorflow()
    import numpy as np
    import tensorflow as tf

    from albert_tf import AlbertConfig, AlbertPretrainer
    from albert_tf.checkpoints.run_folder import load_init_checkpoint
    from albert_tf.checkpoints.weights import model_weights

    config = AlbertConfig.from_json_file(os.path.join(args.checkpoint, "albert_config.json"))
    model = AlbertPretrainer(config)
    model.build()
    load_init_checkpoint(model, args.checkpoint)
    weights = model_weights(model)
    embeddings = {key: v for key, v in weights.items() if key.startswith("encoder/embeddings/")
                  and any(name in key for name in EMBEDDINGS)}
    if len(embeddings) != len(EMBEDDINGS):
        raise ValueError(f"expected the three embedding tables, found {sorted(embeddings)}")
    word = next(v for key, v in embeddings.items() if "word_embeddings" in key)
    target = args.target_stddev or config.initializer_range
    factor = target / float(np.std(word.numpy()))

    rng = np.random.default_rng(0)  # a random batch: any ids show whether the outputs move
    batch = {"input_ids": rng.integers(5, config.vocab_size, (4, 64)).astype(np.int32),
             "input_mask": np.ones((4, 64), np.int32), "segment_ids": np.zeros((4, 64), np.int32)}
    before = model.encoder(batch)["sequence_output"].numpy()
    for key, variable in embeddings.items():
        variable.assign(variable * factor)
    change = float(np.abs(model.encoder(batch)["sequence_output"].numpy() - before).max())
    print(f"embeddings scaled by {factor:.4f} (word stddev {target / factor:.4f} -> {target:.4f}); "
          f"largest change of the sequence output: {change:.2e}")

    os.makedirs(args.output_dir, exist_ok=True)
    shutil.copy(os.path.join(args.checkpoint, "albert_config.json"), args.output_dir)
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=weights), args.output_dir,
                                         max_to_keep=1, checkpoint_name="ckpt")
    print("wrote", manager.save())


if __name__ == "__main__":
    main()
