"""Update parity: 20 steps of the real training loop (`albert_tf.training.loop.Trainer`, the
fine-tuning's task and pretraining's on the one Trainer, one device and two mirrored replicas, with
gradient accumulation) against the same steps taken by an independent implementation, written here
in PyTorch on Hugging Face's model, of the rules the loop claims to follow; after every step each
weight of ours equals the reference's.

The rules, as google-research/albert defines them (optimization.py's AdamWeightDecayOptimizer and
create_optimizer, lamb_optimizer.py's LAMBOptimizer):

- the gradient of the whole global batch, clipped to a global norm of 1.0;
- m = 0.9 m + 0.1 g, v = 0.999 v + 0.001 g^2, with no bias correction; update = m / (sqrt(v) + 1e-6);
- weight decay 0.01 added to the update (`update += 0.01 w`) except for the weights whose names hold
  "LayerNorm", "layer_norm" or "bias";
- LAMB: the update times ||w|| / ||update|| (1 where either is 0), for the same weights only;
- the rate of update k (from 1): peak * k / warmup during warmup, then peak * (1 - k / steps).

and `--optimizer=adamw` (NER's `hf` recipe, taken from Hugging Face) against `torch.optim.AdamW`
itself, set up as Hugging Face's Trainer sets it up (`TorchAdamW`), on the same schedule.

The two mirrored replicas need two logical CPU devices, which TensorFlow only makes before it
starts: our side of that run happens in a child of the warm Python (tests/warm_python.py), which
runs tests/finetune/update_parity_steps.py, and the reference's steps in the test's process.
`python -m tests.finetune.test_update_parity --table` prints the table of docs/finetuning.md.
"""

from __future__ import annotations

import copy
import json
import math
import re
import sys

import numpy as np
import pytest
import torch

from tests.conftest import REPO_ROOT, SMALL_DATA_DIR
from tests.finetune import hf_tasks
from tests.finetune.update_parity_steps import PEAK, SEQ, STEPS, WARMUP, batch_size, our_steps, read_steps, write_start
# Float32 summation order differs between the two frameworks (and between one device and two
# replicas); over 20 steps the weights stay within 2e-7 of each other, where a step's update moves
# them by up to the rate (1e-3), and the release's AdamW and a bias-corrected one end 1e-2 apart.
WEIGHT_ATOL = 2e-5
EXCLUDED = ("LayerNorm", "layer_norm", "bias")


def rate(k, peak=PEAK, steps=STEPS, warmup=WARMUP):
    """The learning rate of update k (from 1)."""
    if k < warmup:
        return peak * k / warmup
    return peak * (1 - min(k, steps) / steps)


class ReleaseOptimizer:
    """The release's AdamW (`lamb=False`) or LAMB (`lamb=True`) on `model`'s parameters, with the
    schedule of warmup then linear decay and clipping to global norm 1.0 (see the module's text)."""

    def __init__(self, model, lamb: bool, peak=PEAK, steps=STEPS, warmup=WARMUP, weight_decay=0.01,
                 bias_correction=False):
        self.parameters = dict(model.named_parameters())
        self.lamb, self.bias_correction = lamb, bias_correction
        self.peak, self.steps, self.warmup, self.weight_decay = peak, steps, warmup, weight_decay
        self.m = {n: torch.zeros_like(p, dtype=torch.float64) for n, p in self.parameters.items()}
        self.v = {n: torch.zeros_like(p, dtype=torch.float64) for n, p in self.parameters.items()}
        self.k = 0

    def step(self):
        self.k += 1
        grads = {n: p.grad.double() for n, p in self.parameters.items() if p.grad is not None}
        norm = math.sqrt(sum(float((g * g).sum()) for g in grads.values()))
        scale = 1.0 / max(norm, 1.0)
        lr = rate(self.k, self.peak, self.steps, self.warmup)
        with torch.no_grad():
            for name, g in grads.items():
                p = self.parameters[name]
                w = p.double()
                g = g * scale
                self.m[name] = 0.9 * self.m[name] + 0.1 * g
                self.v[name] = 0.999 * self.v[name] + 0.001 * g * g
                m, v = self.m[name], self.v[name]
                if self.bias_correction:
                    m, v = m / (1 - 0.9 ** self.k), v / (1 - 0.999 ** self.k)
                update = m / (v.sqrt() + 1e-6)
                decayed = not any(re.search(pattern, name) for pattern in EXCLUDED)
                if decayed:
                    update = update + self.weight_decay * w
                ratio = 1.0
                if self.lamb and decayed:
                    w_norm, u_norm = float(w.norm()), float(update.norm())
                    ratio = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
                p.copy_((w - ratio * lr * update).float())
                p.grad = None


class TorchAdamW:
    """`torch.optim.AdamW` as Hugging Face's Trainer sets it up (bias correction, epsilon 1e-6 here,
    decoupled weight decay 0.01 but for biases and LayerNorm weights, gradients clipped by
    `clip_grad_norm_` to 1.0), its rate set to update k's before each step."""

    def __init__(self, model, weight_decay=0.01):
        self.model = model
        self.parameters = dict(model.named_parameters())
        decayed = [n for n in self.parameters if not any(re.search(pattern, n) for pattern in EXCLUDED)]
        groups = [{"params": [self.parameters[n] for n in decayed], "weight_decay": weight_decay},
                  {"params": [p for n, p in self.parameters.items() if n not in decayed], "weight_decay": 0.0}]
        self.optimizer = torch.optim.AdamW(groups, lr=PEAK, betas=(0.9, 0.999), eps=1e-6)
        self.k = 0

    def step(self):
        self.k += 1
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        for group in self.optimizer.param_groups:
            group["lr"] = rate(self.k)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


def _tokenizer():
    from albert_tf.tokenizers.tokenizer import AlbertTokenizer

    return AlbertTokenizer(str(hf_tasks.SPM_MODEL))


def _glue_records(tmp, count):
    from finetune.glue.task import GlueTask

    task = GlueTask("MRPC", SMALL_DATA_DIR / "glue")
    cached = task.features("train", _tokenizer(), SEQ, f"{tmp}/features")
    return hf_tasks.first_batch(cached, count)


def _hf_glue_loss(hf, batch):
    return hf(**hf_tasks.torch_inputs(batch), labels=torch.from_numpy(batch["label_ids"]).long()).loss


def _hf_pretraining_loss(hf, batch):
    return hf(**hf_tasks.torch_inputs(batch), **hf_tasks.pretraining_labels(batch)).loss


def reference_start(tmp, case: str) -> dict:
    """What both sides of `case` start from: the tiny config, the records and Hugging Face's model
    (randomised), whose weights are also given by our names (`initial`, every weight both have)."""
    config = hf_tasks.tiny_config()
    if case == "pretraining_lamb":
        records = hf_tasks.pretraining_records(_tokenizer(), SEQ, 48)
        kind, hf_loss, lamb = "pretraining", _hf_pretraining_loss, True
    else:
        records = _glue_records(tmp, 48)
        kind, hf_loss, lamb = "classifier", _hf_glue_loss, False
    outputs = 2 if kind == "classifier" else 0
    hf = hf_tasks.hf_model(kind, config, outputs, seed=1)
    names = hf_tasks.weight_names(kind, config, outputs)
    # Copies: the reference's steps update the parameters in place.
    state = {k: v.detach().numpy().copy() for k, v in hf.state_dict().items()}
    initial = {n.ours: n.to_ours(state[n.source]) for n in names if n.source in state}
    return {"case": case, "config": config, "records": records, "hf": hf, "names": names, "initial": initial,
            "hf_loss": hf_loss, "lamb": lamb}


def follow(start: dict, ours: dict, strategy_name: str) -> dict:
    """The reference's STEPS updates from `start` beside ours (`update_parity_steps.our_steps`):
    the largest weight difference after each step and what the run was."""
    case, hf, hf_loss, records = start["case"], start["hf"], start["hf_loss"], start["records"]
    # Every trainable weight of ours has exactly one parameter there (as hf_tasks.WeightMap checks),
    # so a difference taken over them is over every weight the loop updates.
    parameters, by_name = dict(hf.named_parameters()), {n.ours: n for n in start["names"]}
    missing = [key for key in ours["trainable"] if key not in by_name or by_name[key].source not in parameters]
    if missing:
        raise ValueError(f"trainable weights without a Hugging Face parameter: {missing}")
    entries = [(key, by_name[key]) for key in ours["trainable"]]
    # Beside the reference, the other AdamW (with bias correction for the release's rules, without
    # for torch's), which the loop does not follow: how far it leaves ours shows the test can fail.
    contrast_model = copy.deepcopy(hf)
    if case == "finetuning_adamw":
        reference, contrast = TorchAdamW(hf), ReleaseOptimizer(contrast_model, lamb=False)
    else:
        reference = ReleaseOptimizer(hf, lamb=start["lamb"])
        contrast = ReleaseOptimizer(contrast_model, lamb=start["lamb"], bias_correction=True)
    count, size = len(records["input_ids"]), batch_size(case)
    contrast_parameters = dict(contrast_model.named_parameters())

    def difference(parameters, weights):
        return max(float(np.max(np.abs(weights[key] - name.to_ours(parameters[name.source].detach().numpy()))))
                   for key, name in entries)

    differences, contrast_differences, losses = [], [], []
    for k in range(STEPS):
        rows = [(k * size + i) % count for i in range(size)]
        batch = {name: value[rows] for name, value in records.items()}
        loss = hf_loss(hf, batch)
        loss.backward()
        reference.step()
        if k == 0:  # the contrast is that of the first step: one is enough to show the test can fail
            hf_loss(contrast_model, batch).backward()
            contrast.step()
            contrast_differences.append(difference(contrast_parameters, ours["weights"][0]))
        losses.append((ours["losses"][k], float(loss.detach())))
        differences.append(difference(reference.parameters, ours["weights"][k]))
    moved = max(float(np.max(np.abs(ours["weights"][-1][key] - start["initial"][key]))) for key, _ in entries)
    return {"case": case, "strategy": strategy_name, "replicas": ours["replicas"],
            "accumulation": ours["accumulation"], "differences": differences, "losses": losses, "moved": moved,
            "contrast_differences": contrast_differences, "weights": len(entries)}


def trajectory(tmp, case: str, strategy_name: str, strategy=None) -> dict:
    """Runs `case` for STEPS updates through the real loop under `strategy_name` (or the one
    `strategy` made of that name) and the reference beside it, in this process; returns the largest
    weight difference after each step and what the run was."""
    start = reference_start(tmp, case)
    ours = our_steps(tmp, case, start["config"], start["records"], start["initial"], strategy_name, strategy)
    return follow(start, ours, strategy_name)


def check(result):
    assert len(result["differences"]) == STEPS
    assert max(result["differences"]) < WEIGHT_ATOL, result
    np.testing.assert_allclose([o for o, _ in result["losses"]], [t for _, t in result["losses"]], rtol=1e-5)
    assert result["moved"] > 100 * WEIGHT_ATOL  # the steps moved the weights far beyond the tolerance
    # The comparison can fail: the other AdamW leaves ours at the first step.
    assert result["contrast_differences"][0] > 10 * WEIGHT_ATOL


@pytest.mark.parametrize("case", ["finetuning_adamw_release", "finetuning_adamw"])
def test_adamw_fine_tuning_on_one_device(case, tmp_path):
    """The release's AdamW (GLUE, SQuAD, RACE) and torch's (NER's `hf` recipe)."""
    check(trajectory(tmp_path, case, "one_device"))


def test_lamb_pretraining_on_mirrored_replicas_with_accumulation(tmp_path, warm_python):
    """LAMB pretraining on 2 mirrored replicas of 2 micro-batches each. (That fine-tuning on mirrored
    replicas follows its one-device trajectory is tests/finetune/test_glue_training.py's.) Our steps
    are the child's (tests/finetune/update_parity_steps.py), the reference's this process's."""
    start = reference_start(tmp_path, "pretraining_lamb")
    write_start(tmp_path, start["config"], start["records"], start["initial"])
    result = warm_python.run(["-m", "tests.finetune.update_parity_steps", tmp_path, "pretraining_lamb"],
                             cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    ours = read_steps(tmp_path, json.loads(result.stdout.strip().splitlines()[-1]))
    report = follow(start, ours, "mirrored")
    assert (report["replicas"], report["accumulation"]) == (2, 2)
    check(report)


def table(tmp, mirrored):
    """The table of docs/finetuning.md: each case's largest weight difference over the steps."""
    print("| run | loop's optimizer | reference | largest weight difference, 20 steps | the other AdamW, step 1 |")
    print("|---|---|---|---|---|")
    for case, strategy_name, reference in (
            ("finetuning_adamw_release", "one_device", "the release's AdamW, written here"),
            ("finetuning_adamw", "one_device", "`torch.optim.AdamW`"),
            ("pretraining_lamb", "mirrored", "the release's LAMB, written here")):
        r = trajectory(tmp, case, strategy_name, mirrored if strategy_name == "mirrored" else None)
        where = f"{r['replicas']} mirrored replicas x {r['accumulation']} micro-batches" if r["replicas"] > 1 else "one device"
        print(f"| {'GLUE MRPC' if 'finetuning' in case else 'pretraining'}, {where} | {case.split('_', 1)[1]} | "
              f"{reference} | {max(r['differences']):.1e} | {r['contrast_differences'][0]:.1e} |", flush=True)


if __name__ == "__main__":
    import tempfile

    from albert_tf.training import strategies

    # One strategy for every mirrored run: two MirroredStrategy objects in one process number their
    # collective ops alike, and the second run's all-reduces then meet the first's.
    mirrored = strategies.get_strategy("mirrored", cpu_devices=2)
    if sys.argv[1:] == ["--table"]:  # python -m tests.finetune.test_update_parity --table
        with tempfile.TemporaryDirectory() as folder:
            table(folder, mirrored)
