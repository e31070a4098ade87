"""How far transformers' outputs of a v1 ALBERT are from the release's (issue 38): the Hub's v1
config.json says "gelu", which transformers computes exactly, while the release (and albert_tf)
computes the tanh form the weights were trained with ("gelu_new" in transformers, whose outputs
albert_tf equals to 1e-5: tests/albert_tf/models/test_hf_parity.py).

One AlbertModel of `--size` with transformers' random initialisation, run on real sentence pairs
(RTE's, the released 30k-clean.model) with either activation on the same weights; prints the
largest and the mean absolute difference of the sequence and pooled outputs, beside their mean
magnitude.

    python bench/v1_gelu_gap.py [--size albert_base_v1] [--pairs 16] [--seq_length 128]
"""

import argparse

import harness

harness.quiet_tensorflow("3")

from serving_peers import sentences  # noqa: E402

from albert_tf.config import AlbertConfig  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    harness.add_threads(parser)
    parser.add_argument("--size", default="albert_base_v1")
    parser.add_argument("--pairs", type=int, default=16)
    parser.add_argument("--seq_length", type=int, default=128)
    args = parser.parse_args()
    harness.set_threads(args.threads, torch=True)
    import torch
    import transformers

    ours = AlbertConfig.named(args.size)
    shape = dict(vocab_size=ours.vocab_size, embedding_size=ours.embedding_size, hidden_size=ours.hidden_size,
                 num_hidden_layers=ours.num_hidden_layers, num_attention_heads=ours.num_attention_heads,
                 intermediate_size=ours.intermediate_size, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    release = transformers.AlbertModel(transformers.AlbertConfig(hidden_act="gelu_new", **shape)).eval()
    exact = transformers.AlbertModel(transformers.AlbertConfig(hidden_act="gelu", **shape)).eval()
    exact.load_state_dict(release.state_dict())
    features = sentences(args.pairs, args.seq_length)
    inputs = {"input_ids": torch.tensor(features["input_ids"], dtype=torch.long),
              "attention_mask": torch.tensor(features["input_mask"], dtype=torch.long),
              "token_type_ids": torch.tensor(features["segment_ids"], dtype=torch.long)}
    with torch.no_grad():
        a, b = release(**inputs), exact(**inputs)
    rows = []
    for name in ("last_hidden_state", "pooler_output"):
        gap = (a[name] - b[name]).abs()
        rows.append([name, f"{float(gap.max()):.2e}", f"{float(gap.mean()):.2e}", f"{float(a[name].abs().mean()):.3f}"])
    print(f"{args.size} shapes, random weights, {args.pairs} RTE pairs of {args.seq_length} tokens; {harness.cpu_model()}")
    harness.print_table(["output", "max |gap|", "mean |gap|", "mean |output|"], rows)


if __name__ == "__main__":
    main()
