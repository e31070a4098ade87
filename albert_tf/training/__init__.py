"""Training: what a run is told (`options`, free of TensorFlow), the trainer and its task protocol
(`loop`, `task`), pretraining (`pretraining`), optimizers, strategies and replicas, preemption,
summaries and curves."""
