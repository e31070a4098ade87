"""What every Keras model built from an `AlbertConfig` shares: the config, its serialization, presets."""

from __future__ import annotations

import contextlib

import keras

from albert_tf.config import AlbertConfig


def as_config(config: AlbertConfig | dict) -> AlbertConfig:
    return config if isinstance(config, AlbertConfig) else AlbertConfig.from_dict(config)


@contextlib.contextmanager
def shapes_only():
    """Variables created inside get their real shapes and no values: for counting parameters.

    The layers build as always (same code, same variables), but the hundreds of millions of random
    floats of a large size are never drawn. Such variables cannot be read or trained.
    """
    # Keras keeps the variables it owes values in a list with no public handle; without trimming
    # it, the next StatelessScope exit (any symbolic call, anywhere) would draw them after all.
    from keras.src.backend.common import global_state

    pending = global_state.get_global_attribute("uninitialized_variables", [], set_to_default=True)
    already = len(pending)
    try:
        with keras.StatelessScope(initialize_variables=False):
            yield
    finally:
        del pending[already:]


class BackboneAlias:
    """keras-hub's name for a task model's encoder: `model.backbone` is `model.encoder`.

    A read-only alias, not a second tracked attribute: checkpoints, `.keras` files and weight
    names hold the encoder once, under `encoder`.
    """

    @property
    def backbone(self):
        encoder = self._backbone_encoder()
        if encoder is None:
            raise AttributeError(f"{type(self).__name__} is an encoder, not a task model: it has no backbone")
        return encoder

    def _backbone_encoder(self):
        return getattr(self, "encoder", None)

    def __dir__(self):
        # Keras' `.keras` saving walks dir(): the alias must not be a second path to the encoder's
        # weights (it sorts before `encoder` and would rename them in the file).
        return [name for name in super().__dir__() if name != "backbone"]


class TracedOnceFit:
    """`keras.Model.fit` whose train step is traced once.

    Keras' TensorFlow trainer without a distribution strategy makes the optimizer's variables (its
    moments) inside the first trace of the train step, and tf.function, finding variables made, then
    traces the whole forward and backward pass again. Made here before fit, under the model's
    strategy as Keras makes them when there is one, the step is traced once: a tiny text classifier's
    first fit took 4.2 s of CPU instead of 9.3 s, with the same losses (measured on 2026-11-29).
    """

    def fit(self, *args, **kwargs):
        optimizer = getattr(self, "optimizer", None)  # none before compile: Keras' fit then says so
        if optimizer is not None and not optimizer.built and self.built:
            with self.distribute_strategy.scope():
                optimizer.build(self.trainable_variables)
        return super().fit(*args, **kwargs)


class AlbertConfigModel(BackboneAlias, TracedOnceFit, keras.Model):
    """Base of the models built from an `AlbertConfig` (the encoder, the pretrainer, task models).

    Keeps the config as `self.config` and serializes it with the constructor arguments named in
    `config_arguments` (each stored as an attribute of that name), so that
    `from_config(get_config())` and `.keras` files rebuild the model exactly.
    """

    config_arguments: tuple[str, ...] = ()

    def __init__(self, config: AlbertConfig | dict, **kwargs):
        super().__init__(**kwargs)
        self.config = as_config(config)

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.saving.serialize_keras_object(self.dtype_policy),
            "config": self.config.to_dict(),
            **{name: getattr(self, name) for name in self.config_arguments},
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.saving.deserialize_keras_object(config["dtype"])
        return cls(**config)

    # Whether `from_preset` refuses a preset without this class's own weights beside the encoder
    # (the pretrainer: its heads were pretrained too); other task models then get new heads.
    preset_heads_required = False

    @classmethod
    def from_preset(cls, preset, **kwargs):
        """The model of any model source: a released name (`albert_base_v2`), a URL of a release
        tarball (`...#sha256=<hex>` to pin it), `hf://<repo>`, a preset folder, a run's output_dir
        (albert-pretrain, albert-finetune-*), a SavedModel of albert-export, a release's folder or
        checkpoint (`albert_tf.presets.model_source`); `kwargs` go to the constructor (e.g. `dtype`).

        The encoder loads from any preset (a pretrainer's, a classifier's); a task model's heads load
        from a preset of its own class, and are new otherwise (refused for the pretrainer).
        """
        from albert_tf.presets.loader import model_from_preset

        return model_from_preset(cls, preset, cls.preset_heads_required, **kwargs)

    def save_to_preset(self, preset_dir, spm_model_file) -> str:
        """Writes this model as a preset folder (new or empty) with the vocabulary `spm_model_file`."""
        from albert_tf.presets.folder import model_task, save_model

        return save_model(self, preset_dir, spm_model_file, model_task(self))
