"""What pretraining is worth for named entities (issue 42's measure): dev F1 on WNUT-17 after
fine-tuning the demo's checkpoint (runs/demo/model, written by ./run_demo.sh) and random weights
of the same config, on the same training file, steps, seed and learning rate.

    python -m pytest -q -m measure tests/finetune/test_ner_measure.py -s

Minutes of CPU: left out of the default run (the `measure` marker). Hugging Face's 2e-5 is for
base-sized models; at the 2e-4 that experiments/glue_pretraining_helps.py gives the small demo
model, 3 epochs left both encoders tagging every word "O" (F1 0), so the run is 5 epochs of batch
16 at 1e-3 with 10% warmup. The figures go to docs/ner.md.
"""

import json

import pytest

from finetune.ner import cli
from tests.conftest import REPO_ROOT

DEMO = REPO_ROOT / "runs" / "demo"
STEPS = 1060  # 5 epochs of WNUT-17's 3,394 training sentences at batch 16


@pytest.mark.slow
@pytest.mark.measure
def test_dev_f1_on_wnut17_from_the_demo_checkpoint_and_from_random_weights(data_dir, tmp_path):
    if not (DEMO / "model" / "checkpoint").is_file():
        pytest.skip(f"needs the demo's checkpoint in {DEMO / 'model'}: run ./run_demo.sh first")
    wnut = data_dir / "ner" / "wnut17"
    common = [f"--spm_model_file={DEMO / 'vocab.model'}", f"--train_file={wnut / 'wnut17train.conll'}",
              f"--eval_file={wnut / 'emerging.dev.conll'}", "--do_train", "--do_eval", "--noexport",
              "--max_seq_length=128", "--learning_rate=1e-3", f"--num_train_steps={STEPS}",
              f"--num_warmup_steps={STEPS // 10}", "--train_batch_size=16", "--seed=12345", "--steps_per_loop=212",
              "--progress_bar=false"]
    sources = {"pretrained": [f"--init_checkpoint={DEMO / 'model'}"],
               "random": [f"--albert_config_file={DEMO / 'model' / 'albert_config.json'}"]}
    results = {}
    for name, source in sources.items():
        cli.finetune(["albert-finetune-ner", f"--output_dir={tmp_path / name}", *source, *common])
        results[name] = json.loads((tmp_path / name / "eval_results.json").read_text())["dev"]
        assert (results[name]["examples"], results[name]["entities"]) == (1009, 836)  # the whole dev file
    for name, dev in results.items():
        print(f"{name}: dev precision {dev['precision']:.4f} recall {dev['recall']:.4f} f1 {dev['f1']:.4f} "
              f"token accuracy {dev['accuracy']:.4f} ({dev['predicted_entities']} entities predicted)")
