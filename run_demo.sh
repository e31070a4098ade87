#!/usr/bin/env bash
# The whole job on the embedded corpus (data/corpus): a SentencePiece vocabulary, pretraining
# records, a few CPU minutes of pretraining a small ALBERT (configs/albert_demo.json), masked-LM and
# SOP accuracy on held-out records, the exported SavedModels, and masked sentences filled in.
# Usage: ./run_demo.sh [OUTPUT_DIR] (default runs/demo); DEMO_STEPS=N changes the length of training,
# DEMO_CORPUS=DIR reads DIR/train.txt and DIR/heldout.txt (one book a line) instead of data/corpus.
# A rerun keeps what is done: the vocabulary and records are reused, training resumes from its last
# checkpoint (DEMO_STEPS larger than before trains on from there), and the exports are replaced.
set -euo pipefail
cd "$(dirname "$0")"
OUT=${1:-runs/demo}
STEPS=${DEMO_STEPS:-3000}
CORPUS=${DEMO_CORPUS:-data/corpus}
export TF_CPP_MIN_LOG_LEVEL=2
mkdir -p "$OUT"

echo "== 1/5 SentencePiece vocabulary (8,000 pieces) from $CORPUS/train.txt"
[ -f "$OUT/vocab.model" ] || albert-train-vocab --input_file="$CORPUS/train.txt" \
  --input_format=document_per_line --model_prefix="$OUT/vocab" --vocab_size=8000

echo "== 2/5 pretraining records (sequence 128, SOP, whole-word n-gram masking)"
albert-create-pretraining-data --input_file="$CORPUS/train.txt" --input_format=document_per_line \
  --output_dir="$OUT/records/train" --spm_model_file="$OUT/vocab.model" --max_seq_length=128 \
  --max_predictions_per_seq=20 --dupe_factor=10 --num_output_shards=4 --num_workers=2
albert-create-pretraining-data --input_file="$CORPUS/heldout.txt" --input_format=document_per_line \
  --output_dir="$OUT/records/heldout" --spm_model_file="$OUT/vocab.model" --max_seq_length=128 \
  --max_predictions_per_seq=20 --dupe_factor=1 --num_output_shards=1 --num_workers=1

# Batch 16 at a LAMB rate of 0.01: at this size, more smaller updates learn more per CPU second than
# batch 32 at 0.005 (held-out masked-LM accuracy 12.3% vs 8.9% after the same 16,000 examples).
echo "== 3/5 pretraining ($STEPS steps of batch 16 with LAMB; evaluates the held-out book at the end)"
albert-pretrain --input_file="$OUT/records/train/*.tfrecord" \
  --eval_input_file="$OUT/records/heldout/*.tfrecord" --output_dir="$OUT/model" \
  --albert_config_file=configs/albert_demo.json --spm_model_file="$OUT/vocab.model" \
  --train_batch_size=16 --max_seq_length=128 --max_predictions_per_seq=20 \
  --learning_rate=0.01 --num_train_steps="$STEPS" --num_warmup_steps=$((STEPS / 10)) \
  --save_checkpoints_steps=1000 --steps_per_loop=100

echo "== 4/5 SavedModel of the pretrainer (text in, masked-LM and SOP logits out)"
rm -rf "$OUT/export_pretrainer"
albert-export --init_checkpoint="$OUT/model" --model=pretrainer --spm_model_file="$OUT/vocab.model" \
  --max_seq_length=128 --output_dir="$OUT/export_pretrainer"

echo "== 5/5 masked sentences filled in by the model (one from the training text, one unseen)"
# After a few CPU minutes the model has learnt where frequent words go, little more: expect
# punctuation and function words. Longer runs (DEMO_STEPS) and more text do better.
albert-fill-mask --saved_model="$OUT/export_pretrainer" \
  --text="Sir Walter Elliot, of Kellynch Hall, in Somersetshire, was a [MASK] who, for his own amusement, never took up any book but the Baronetage." \
  --text="The king and the [MASK] of Denmark."
