"""What every Keras model built from an `AlbertConfig` shares: the config, its serialization, presets."""

from __future__ import annotations

import keras

from albert_tf.config import AlbertConfig


def as_config(config: AlbertConfig | dict) -> AlbertConfig:
    return config if isinstance(config, AlbertConfig) else AlbertConfig.from_dict(config)


class AlbertConfigModel(keras.Model):
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

    @classmethod
    def from_preset(cls, preset_dir, **kwargs):
        """The model of a preset folder (config.json, model.weights.h5, spiece.model), as written by
        `albert_tf.convert`; `kwargs` go to the constructor (e.g. `dtype`). An encoder loads from a
        pretrainer preset too (the heads are left out); a model with heads refuses a preset without
        them (its heads would be random)."""
        from albert_tf.convert import load_preset_model

        return load_preset_model(cls, preset_dir, **kwargs)
