"""A text classifier as keras-hub users know it: `from_preset`, then `fit`, `predict` and `export`
on raw strings.

`AlbertTextClassifier` joins an `albert_tf.models.AlbertClassifier` (encoder, pooled output,
dropout, dense) and an `AlbertTextPreprocessor`; `fit`, `evaluate` and `predict` take strings (or
pairs of strings) and run the preprocessor in the input pipeline, as keras-hub's tasks do. It is
compiled on creation with keras-hub's defaults (Adam at 5e-5, sparse categorical cross-entropy on
logits, accuracy); `compile` again for others. The command-line fine-tuning with the paper's
presets is finetune/glue (docs/finetuning.md); this is the few-lines path.

Example:
    >>> classifier = AlbertTextClassifier.from_preset("albert_base_v2", labels=["negative", "positive"])
    >>> classifier.backbone                              # its AlbertEncoder (keras-hub's name)
    >>> classifier.fit(x=["A gem of a film.", "Dull."], y=[1, 0], batch_size=2, epochs=3)
    >>> classifier.predict(["What a delight."])          # logits [1, 2]
    >>> classifier.save_to_preset("my_classifier")       # from_preset("my_classifier") reloads it
    >>> classifier.export("exported")                    # serve_text: raw strings in, probabilities out
    >>> albert_tf.presets.convert.convert_preset_to_hf("my_classifier", "hf_classifier")  # AlbertForSequenceClassification
    >>> AlbertEncoder.from_preset("my_classifier")         # its encoder, as from any preset
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from albert_tf.data.datasets import traced_as_written
from albert_tf.utils.errors import UserError
from albert_tf.models.base import BackboneAlias, TracedOnceFit
from albert_tf.models.classifier import AlbertClassifier
from albert_tf.presets.folder import TEXT_CLASSIFIER_TASK as TASK_CLASS
from albert_tf.tokenizers.preprocessor import AlbertTextPreprocessor
from albert_tf.utils.validation import check_positions

_TOKENIZE_CHUNK = 1024  # strings tokenized per call of the in-graph preprocessor


def _is_pair(x) -> bool:
    return isinstance(x, tuple) and len(x) == 2 and not isinstance(x[0], str)


def _class_names(labels, num_classes: int) -> list[str] | None:
    """`labels` as a list of class names, one a class, or None; a ValueError naming both counts."""
    if labels is None:
        return None
    if isinstance(labels, str):
        labels = [labels]
    names = [str(label) for label in labels]
    if len(names) != num_classes:
        raise UserError(f"{len(names)} labels for {num_classes} classes: give one name a class, in class-id order")
    return names


def _texts(x, name: str) -> np.ndarray:
    """A list of strings as a numpy array of str; anything else in it (None, a number, bytes) is an
    error naming its place: `str(None)` would be classified as the text "None"."""
    texts = list(x)
    for index, text in enumerate(texts):
        if not isinstance(text, str):
            raise UserError(f"{name}[{index}] is {text!r} ({type(text).__name__}), not a string: "
                            "AlbertTextClassifier reads texts (str)")
    return np.asarray(texts, dtype=object).astype(str)


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertTextClassifier(BackboneAlias, TracedOnceFit, keras.Model):
    """An ALBERT classifier with its preprocessor, trained and called on raw text.

    Args:
        classifier: an `AlbertClassifier` (num_classes classes; 1 for a regressor).
        preprocessor: an `AlbertTextPreprocessor`.

    `call` takes the packed token ids (what the preprocessor returns) and gives the logits;
    `fit`, `evaluate` and `predict` take strings [N], or a pair `(texts_a, texts_b)`, with labels.
    """

    def __init__(self, classifier: AlbertClassifier, preprocessor: AlbertTextPreprocessor, labels=None, **kwargs):
        super().__init__(**kwargs)
        self.classifier = classifier
        self.preprocessor = preprocessor
        # The class names (for export and conversion), in class-id order; None: unnamed.
        self.labels = _class_names(labels, classifier.num_classes)

    def _backbone_encoder(self):
        return self.classifier.encoder

    @property
    def num_classes(self) -> int:
        return self.classifier.num_classes

    def call(self, inputs, training=None):
        return self.classifier(inputs, training=training)

    def build(self, input_shape=None):
        if not self.classifier.built:  # from_config gives it built (its serialized build config)
            self.classifier.build()
        self.built = True

    def get_config(self):
        return {"name": self.name, "trainable": self.trainable, "labels": self.labels,
                "classifier": keras.saving.serialize_keras_object(self.classifier),
                "preprocessor": keras.saving.serialize_keras_object(self.preprocessor)}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["classifier"] = keras.saving.deserialize_keras_object(config["classifier"])
        config["preprocessor"] = keras.saving.deserialize_keras_object(config["preprocessor"])
        return cls(**config)

    # ---- presets -----------------------------------------------------------------------------

    @classmethod
    def from_preset(cls, preset, num_classes: int | None = None, sequence_length: int | None = None,
                    dropout: float | None = None, labels=None, **kwargs) -> "AlbertTextClassifier":
        """A classifier on any model source (a released name, a URL, hf://, a preset
        folder, a run's output_dir, an export: `albert_tf.presets.model_source`): a fine-tuned one (written by `save_to_preset`) comes back whole;
        any other preset's encoder gets a new head of `num_classes` (or of `len(labels)` classes
        named `labels`); `sequence_length`, `dropout` and `labels` given override the saved ones
        (`albert_tf.presets.loader.task_arguments` is the rule, as for every model). The class names are kept in the model's config and preset, and become
        `id2label`/`label2id` when the preset is converted to Hugging Face."""
        from albert_tf.presets import loader

        source = loader.open_source(preset)
        given = {"num_classes": num_classes, "sequence_length": sequence_length, "dropout": dropout,
                 "labels": labels}
        # What the caller gives overrides what a saved classifier stored; the rest is the default.
        given = {k: v for k, v in given.items() if v is not None}
        # `labels` alone name a saved head's classes, or size a new head.
        arguments, load_heads = loader.task_arguments(source, TASK_CLASS, given,
                                                      required=("num_classes",) if labels is None else ())
        if not load_heads and num_classes is None:
            arguments["num_classes"] = len(labels)
        arguments = {"sequence_length": min(128, source.config.max_position_embeddings), "dropout": 0.1,
                     "labels": None, **arguments}
        if labels is None and arguments["labels"] and len(arguments["labels"]) != arguments["num_classes"]:
            arguments["labels"] = None  # a run's labels of another count (a regression's): unnamed
        model = cls._build(source.config, source.vocabulary(), arguments["num_classes"],
                           arguments["sequence_length"], arguments["dropout"], labels=arguments["labels"], **kwargs)
        loader.load_weights(model.classifier, source, load_heads)
        return model

    @classmethod
    def _build(cls, config, vocab, num_classes, sequence_length, dropout, labels=None, **kwargs):
        check_positions(sequence_length, config.max_position_embeddings, "sequence_length")
        classifier = AlbertClassifier(config, num_classes, dropout, dtype=kwargs.pop("dtype", None))
        model = cls(classifier, AlbertTextPreprocessor(vocab, sequence_length), labels=labels, **kwargs)
        model.build()
        model.compile()
        return model

    def save_to_preset(self, preset_dir) -> str:
        """Writes the classifier as a preset folder (new or empty) that `from_preset` reloads whole;
        its encoder is a preset's encoder, which every model class loads."""
        from albert_tf.presets.folder import save_model

        task = {"class": TASK_CLASS, "arguments": {
            "num_classes": self.num_classes, "sequence_length": self.preprocessor.sequence_length,
            "dropout": self.classifier.dropout, "labels": self.labels}}
        return save_model(self.classifier, preset_dir, self.preprocessor.spm_model_file, task)

    # ---- training and prediction on raw text -------------------------------------------------

    def compile(self, optimizer="auto", loss="auto", metrics="auto", **kwargs):
        """keras-hub's defaults: Adam at 5e-5, cross-entropy on logits (squared error for one
        output), accuracy."""
        regression = self.num_classes == 1
        if optimizer == "auto":
            optimizer = keras.optimizers.Adam(5e-5)
        if loss == "auto":
            loss = (keras.losses.MeanSquaredError() if regression
                    else keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        if metrics == "auto":
            metrics = [] if regression else [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def _dataset(self, x, y=None, batch_size=32, shuffle=False, seed=None):
        """Strings (or a pair of string lists) and labels as a tf.data pipeline of packed batches,
        tokenized once (not once per epoch); a `tf.data.Dataset` of `(texts, labels)` is
        preprocessed batch by batch as it comes."""
        if isinstance(x, tf.data.Dataset):
            @traced_as_written
            def preprocess(*element):
                features = self.preprocessor(element[0])
                return features if len(element) == 1 else (features, *element[1:])

            return x.map(preprocess, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
        texts, y = self._checked(x, y)
        size = len(texts[0]) if _is_pair(x) else len(texts)
        chunks = []
        for begin in range(0, size, _TOKENIZE_CHUNK):
            part = tuple(t[begin:begin + _TOKENIZE_CHUNK] for t in texts) if _is_pair(x) else \
                texts[begin:begin + _TOKENIZE_CHUNK]
            chunks.append({k: v.numpy() for k, v in self.preprocessor(part).items()})
        features = {k: np.concatenate([c[k] for c in chunks]) for k in chunks[0]} if chunks else {}
        dataset = tf.data.Dataset.from_tensor_slices(features if y is None else (features, np.asarray(y)))
        if shuffle:
            dataset = dataset.shuffle(size, seed=seed, reshuffle_each_iteration=True)
        return dataset.batch(batch_size).prefetch(tf.data.AUTOTUNE)

    def _checked(self, x, y):
        """Texts as numpy arrays of str (a pair: two of one length) and labels as an array, checked.

        A lone string is a batch of one, as keras-hub's preprocessors take one unbatched string
        (`predict("A gem.")` gives logits [1, C]); its label may be a lone number too. Labels of a
        classifier are class ids (integers, floats only if whole) below `num_classes`.
        """
        if isinstance(x, str):
            x, y = [x], (None if y is None else np.reshape(y, [-1]))
        if _is_pair(x):
            texts = (_texts(x[0], "x[0]"), _texts(x[1], "x[1]"))
            if len(texts[0]) != len(texts[1]):
                raise UserError(f"the pair x holds {len(texts[0])} first texts and {len(texts[1])} second ones")
        else:
            texts = _texts(x, "x")
        size = len(texts[0]) if _is_pair(x) else len(texts)
        if y is None:
            return texts, None
        if size == 0:
            raise UserError("x holds no text: nothing to train or evaluate on")
        labels = np.asarray(y)
        if labels.ndim != 1 or len(labels) != size:
            raise UserError(f"y holds {labels.size} labels (shape {list(labels.shape)}) for {size} texts: "
                            "give one label a text")
        if self.num_classes == 1:
            if labels.dtype.kind not in "biuf":
                raise UserError(f"y holds {labels.dtype} values: a regressor's labels are numbers")
            return texts, labels.astype(np.float32)
        if labels.dtype.kind in "iuf":
            bad = np.flatnonzero((labels < 0) | (labels >= self.num_classes) | (np.mod(labels, 1) != 0))
        else:  # strings, booleans, objects
            bad = [0]
        if len(bad):
            raise UserError(f"y[{bad[0]}] is {labels[bad[0]].item()!r}: a classifier's labels are class ids, the "
                            f"integers 0 to {self.num_classes - 1}")
        return texts, labels.astype(np.int32)

    def fit(self, x=None, y=None, batch_size=32, shuffle=True, seed=None, validation_data=None, **kwargs):
        """`keras.Model.fit` on raw strings [N] (or a pair of [N] string lists) and labels [N]."""
        if validation_data is not None and not isinstance(validation_data, tf.data.Dataset):
            validation_data = self._dataset(*validation_data, batch_size=batch_size)
        # The pipeline shuffles (Keras ignores `shuffle` for a tf.data input).
        return super().fit(self._dataset(x, y, batch_size, shuffle=shuffle, seed=seed),
                           validation_data=validation_data, shuffle=False, **kwargs)

    def evaluate(self, x=None, y=None, batch_size=32, **kwargs):
        return super().evaluate(self._dataset(x, y, batch_size), **kwargs)

    def predict(self, x, batch_size=32, **kwargs):
        """Logits [N, num_classes] of raw strings (or a pair of string lists); a lone string is a
        batch of one, and no text gives [0, num_classes]."""
        if not isinstance(x, tf.data.Dataset):
            texts, _ = self._checked(x, None)
            if len(texts[0] if _is_pair(x) else texts) == 0:
                return np.zeros([0, self.num_classes], np.float32)
        return super().predict(self._dataset(x, batch_size=batch_size), **kwargs)

    # ---- serving -----------------------------------------------------------------------------

    def export(self, path, labels=None) -> str:
        """A SavedModel with the signatures of `albert_tf.serving.export` (raw text in `serve_text`)
        returning `probabilities` (and the predicted `label` and `label_names` when `labels`, or the
        model's own `labels`, name the classes); a regressor returns its `score`. The classifier's
        one export (`albert_tf.serving.task_exports`), which albert-export and the GLUE tool use."""
        from albert_tf.serving.task_exports import export_task_saved_model

        labels = _class_names(labels, self.num_classes) if labels is not None else self.labels
        return export_task_saved_model(self.classifier, path, self.preprocessor.spm_model_file,
                                       self.preprocessor.sequence_length, {"labels": labels},
                                       do_lower_case=self.preprocessor.do_lower_case)
