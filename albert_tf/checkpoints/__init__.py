"""Weights by name: how the package names, saves and loads them (`weights`), the tensor names of
the release's TF1 checkpoints and of Hugging Face's (`names`), and a run folder's checkpoints
(`run_folder`). Below presets and training, which both read and write weights through it."""
