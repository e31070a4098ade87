"""A named-entity recognizer as keras-hub users know a task: `from_preset(..., labels=[...])`, `fit`
on lists of words and their tags, `predict` on raw text -> entities, `save_to_preset`, `export`.

`AlbertEntityRecognizer` joins an `albert_tf.models.AlbertTokenClassifier` (encoder, sequence
output, dropout, a dense layer per token), the vocabulary and length of an
`AlbertTextPreprocessor`, and its BIO labels. Sentences become records as the fine-tuning task's
do (`albert_tf.data.tagging`: a word's tag on its first piece, long sentences in windows), and
`predict` runs the graph of the exported SavedModel (`albert_tf.serving.tagging`), so what it
returns is what `serve_text` returns. It is compiled on creation with keras-hub's habits (Adam at
5e-5; here the cross-entropy of the scored pieces only, and their accuracy). The command-line
fine-tuning on CoNLL files is finetune/ner (docs/ner.md); this is the few-lines path.

Example:
    >>> recognizer = AlbertEntityRecognizer.from_preset("albert_base_v2", labels=["person", "location"])
    >>> recognizer.backbone                                   # its AlbertEncoder
    >>> recognizer.fit(x=[["Ada", "lives", "in", "Paris"]], y=[["B-person", "O", "O", "B-location"]], epochs=3)
    >>> recognizer.predict(["Ada lives in Paris"])            # [[{"text": "Ada", "type": "person", ...}, ...]]
    >>> recognizer.save_to_preset("my_tagger")                # from_preset("my_tagger") reloads it
    >>> recognizer.export("exported")                         # serve_text: raw strings in, entities out
    >>> albert_tf.presets.convert.convert_preset_to_hf("my_tagger", "hf")  # AlbertForTokenClassification
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from albert_tf.data.tagging import (DOC_STRIDE, OUTSIDE, bio_labels, check_labels, entity_types, tagging_records,
                                    word_pieces)
from albert_tf.models.base import BackboneAlias, TracedOnceFit
from albert_tf.models.token_classifier import AlbertTokenClassifier
from albert_tf.presets.folder import ENTITY_RECOGNIZER_TASK as TASK_CLASS
from albert_tf.tokenizers.preprocessor import AlbertTextPreprocessor
from albert_tf.utils.errors import UserError
from albert_tf.utils.validation import check_positions


def tag_labels(labels) -> list[str]:
    """`labels` as a BIO label list: a list holding "O" is one already (checked); otherwise it names
    the entity types, each of which gets a B- and an I- tag."""
    if isinstance(labels, str):
        labels = [labels]
    labels = [str(label) for label in labels]
    try:
        tags = check_labels(labels if OUTSIDE in labels else bio_labels(labels))
    except ValueError as error:
        raise UserError(str(error)) from None
    if not entity_types(tags):  # [] or ["O"]: a tagger that can never find an entity
        raise UserError(f"labels {labels} name no entity type: give the types (labels=['person', 'location']) or "
                        "their BIO tags with 'O'")
    return tags


class StopOnNaN(keras.callbacks.Callback):
    """Ends `fit` at the first batch whose loss is not finite with a UserError of one line, the
    weights and the optimizer's state put back as they were when `fit` began (the command line
    stops so too, keeping the checkpoints before): a diverged model would predict nothing, silently."""

    def on_train_begin(self, logs=None):
        self._epoch = 0
        self._saved = [(v, v.numpy()) for v in self.model.weights + list(self.model.optimizer.variables)]

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is None or np.isfinite(float(loss)):
            return
        saved = {id(v) for v, _ in self._saved}
        for variable, value in self._saved:
            variable.assign(value)
        for variable in self.model.optimizer.variables:  # made during this fit (Adam's moments)
            if id(variable) not in saved:
                variable.assign(tf.zeros_like(variable))
        self.model.stop_training = True
        raise UserError(f"loss is {float(loss)} at epoch {self._epoch + 1}, batch {batch + 1}: training diverged "
                        "(the weights are put back as they were before fit); lower the learning rate or check the data")


def masked_token_loss(y_true, y_pred):
    """Each row's mean cross-entropy over its scored positions (label >= 0)."""
    labels = tf.cast(y_true, tf.int32)
    scored = tf.cast(labels >= 0, tf.float32)
    loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tf.maximum(labels, 0), logits=y_pred) * scored
    return tf.reduce_sum(loss, axis=-1) / tf.maximum(tf.reduce_sum(scored, axis=-1), 1.0)


class MaskedTokenAccuracy(keras.metrics.Mean):
    """The accuracy of the scored positions (label >= 0), over all of them."""

    def __init__(self, name="accuracy", **kwargs):
        super().__init__(name=name, **kwargs)

    def update_state(self, y_true, y_pred, sample_weight=None):
        labels = tf.cast(y_true, tf.int32)
        hits = tf.cast(tf.equal(tf.argmax(y_pred, axis=-1, output_type=tf.int32), labels), tf.float32)
        return super().update_state(tf.boolean_mask(hits, labels >= 0))


@keras.saving.register_keras_serializable(package="albert_tf")
class AlbertEntityRecognizer(BackboneAlias, TracedOnceFit, keras.Model):
    """An ALBERT token classifier with its vocabulary and labels, trained on words and tags and
    called on raw text.

    Args:
        tagger: an `AlbertTokenClassifier` of `len(labels)` classes.
        preprocessor: an `AlbertTextPreprocessor` (its vocabulary and `sequence_length`, the tokens
            of one window).
        labels: the BIO tags in the tagger's output order, or the entity types (see `tag_labels`).
        doc_stride: pieces between the starts of two windows of a long sentence.

    `call` takes the encoder's inputs and gives the logits [B, T, len(labels)].
    """

    def __init__(self, tagger: AlbertTokenClassifier, preprocessor: AlbertTextPreprocessor, labels,
                 doc_stride: int = DOC_STRIDE, **kwargs):
        super().__init__(**kwargs)
        self.tagger = tagger
        self.preprocessor = preprocessor
        self.labels = tag_labels(labels)
        if len(self.labels) != tagger.num_classes:
            raise UserError(f"{len(self.labels)} tags ({', '.join(self.labels)}) for a tagger of "
                            f"{tagger.num_classes} classes")
        if not isinstance(doc_stride, int) or doc_stride < 1:
            raise UserError(f"doc_stride must be a positive integer, got {doc_stride!r}")
        self.doc_stride = doc_stride
        self._server = None
        self._python_tokenizer = None

    def _backbone_encoder(self):
        return self.tagger.encoder

    def call(self, inputs, training=None):
        return self.tagger(inputs, training=training)

    def build(self, input_shape=None):
        if not self.tagger.built:
            self.tagger.build()
        self.built = True

    def get_config(self):
        return {"name": self.name, "trainable": self.trainable, "labels": self.labels, "doc_stride": self.doc_stride,
                "tagger": keras.saving.serialize_keras_object(self.tagger),
                "preprocessor": keras.saving.serialize_keras_object(self.preprocessor)}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["tagger"] = keras.saving.deserialize_keras_object(config["tagger"])
        config["preprocessor"] = keras.saving.deserialize_keras_object(config["preprocessor"])
        return cls(**config)

    # ---- presets -----------------------------------------------------------------------------

    @classmethod
    def from_preset(cls, preset, labels=None, sequence_length: int | None = None, dropout: float | None = None,
                    doc_stride: int | None = None, **kwargs) -> "AlbertEntityRecognizer":
        """A recognizer on any model source (a released name, a URL, hf://, a preset folder, a
        run's output_dir, an export): a saved recognizer
        (or a converted `AlbertForTokenClassification`) comes back whole; any other preset's
        encoder gets a new head for `labels` (entity types, or BIO tags with "O"). What is given
        overrides what was saved (`albert_tf.presets.loader.task_arguments`, the rule of every
        model); other labels than a saved head's give a new head."""
        from albert_tf.presets import loader

        source = loader.open_source(preset)
        given = {"sequence_length": sequence_length, "dropout": dropout, "doc_stride": doc_stride}
        if labels is not None:
            given["labels"] = tag_labels(labels)
            given["num_classes"] = len(given["labels"])
        given = {k: v for k, v in given.items() if v is not None}
        arguments, load_heads = loader.task_arguments(source, TASK_CLASS, given, required=("labels",))
        if load_heads and "labels" in given and arguments["labels"] != given["labels"]:
            load_heads = False  # same number of tags, other meanings: a new head
        if "labels" not in arguments:
            raise UserError(f"{source.name} holds {source.holds()} without tag names: give labels")
        arguments = {"sequence_length": min(128, source.config.max_position_embeddings), "dropout": 0.1,
                     "doc_stride": DOC_STRIDE, **arguments}
        check_positions(arguments["sequence_length"], source.config.max_position_embeddings, "sequence_length")
        tagger = AlbertTokenClassifier(source.config, len(arguments["labels"]), arguments["dropout"],
                                       dtype=kwargs.pop("dtype", None))
        model = cls(tagger, AlbertTextPreprocessor(source.vocabulary(), arguments["sequence_length"]),
                    arguments["labels"], arguments["doc_stride"], **kwargs)
        model.build()
        model.compile()
        loader.load_weights(model.tagger, source, load_heads)
        return model

    def save_to_preset(self, preset_dir) -> str:
        """Writes the recognizer as a preset folder (new or empty) that `from_preset` reloads whole;
        its encoder is a preset's encoder, which every model class loads."""
        from albert_tf.presets.folder import save_model

        task = {"class": TASK_CLASS, "arguments": {
            "num_classes": self.tagger.num_classes, "labels": self.labels, "dropout": self.tagger.dropout,
            "sequence_length": self.preprocessor.sequence_length, "doc_stride": self.doc_stride}}
        return save_model(self.tagger, preset_dir, self.preprocessor.spm_model_file, task)

    # ---- training on words and tags, prediction on raw text ----------------------------------

    def compile(self, optimizer="auto", loss="auto", metrics="auto", **kwargs):
        """Adam at 5e-5, the scored pieces' cross-entropy and accuracy (keras-hub's habits)."""
        optimizer = keras.optimizers.Adam(5e-5) if optimizer == "auto" else optimizer
        loss = masked_token_loss if loss == "auto" else loss
        metrics = [MaskedTokenAccuracy()] if metrics == "auto" else metrics
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def _records(self, x, y):
        """Sentences (lists of words) and their BIO tags as arrays of records (windows)."""
        if self._python_tokenizer is None:
            from albert_tf.tokenizers.tokenizer import AlbertTokenizer

            self._python_tokenizer = AlbertTokenizer(self.preprocessor.spm_model_file,
                                                     do_lower_case=self.preprocessor.do_lower_case)
        tokenizer = self._python_tokenizer
        x, y = list(x), list(y)
        if len(x) != len(y):
            raise UserError(f"x holds {len(x)} sentences and y {len(y)} tag lists: give one tag list a sentence")
        if not x:
            raise UserError("x holds no sentence: nothing to train on")
        index_of = {label: i for i, label in enumerate(self.labels)}
        records = []
        for number, (words, tags) in enumerate(zip(x, y)):
            if isinstance(words, str) or any(not isinstance(w, str) or not w or w.split() != [w] for w in words):
                raise UserError(f"x[{number}] is not a list of words (non-empty strings without spaces)")
            if isinstance(tags, str) or any(not isinstance(tag, str) for tag in tags):
                raise UserError(f"y[{number}] is {tags!r}, not a list of tags: give one tag a word "
                                "(['B-person', 'O', ...])")
            if len(words) != len(tags):
                raise UserError(f"x[{number}] holds {len(words)} words and y[{number}] {len(tags)} tags")
            unknown = [tag for tag in tags if tag not in index_of]
            if unknown:
                raise UserError(f"y[{number}] holds the tag {unknown[0]!r}, not one of the labels "
                                f"({', '.join(self.labels)})")
            ids, piece_words = word_pieces(tokenizer, words)
            records += tagging_records(ids, piece_words, [index_of[t] for t in tags], self.preprocessor.sequence_length,
                                       self.doc_stride, tokenizer.cls_id, tokenizer.sep_id, number)
        features = {k: np.stack([r[k] for r in records]) for k in ("input_ids", "input_mask", "segment_ids")}
        return features, np.stack([r["label_ids"] for r in records])

    def fit(self, x=None, y=None, batch_size=16, shuffle=True, seed=None, validation_data=None, **kwargs):
        """`keras.Model.fit` on sentences (lists of words) `x` and their BIO tags `y`."""
        def dataset(x, y, shuffle):
            features, labels = self._records(x, y)
            data = tf.data.Dataset.from_tensor_slices((features, labels))
            if shuffle:
                data = data.shuffle(len(labels), seed=seed, reshuffle_each_iteration=True)
            return data.batch(batch_size).prefetch(tf.data.AUTOTUNE)

        if validation_data is not None:
            validation_data = dataset(*validation_data, shuffle=False)
        callbacks = [*(kwargs.pop("callbacks", None) or ()), StopOnNaN()]
        return super().fit(dataset(x, y, shuffle), validation_data=validation_data, shuffle=False,
                           callbacks=callbacks, **kwargs)

    def _serving(self):
        if self._server is None:
            from albert_tf.serving.tagging import TaggingServer

            server = TaggingServer(self.tagger, self.preprocessor.tokenizer, self.preprocessor.sequence_length,
                                   self.labels, self.doc_stride)
            self._server = tf.function(server.tag, autograph=False,
                                       input_signature=[tf.TensorSpec([None], tf.string)])
        return self._server

    def tag(self, x) -> dict[str, np.ndarray]:
        """The outputs of the SavedModel's `serve_text` for raw strings `x` (a lone string is a batch
        of one): entities and word tags, padded (`albert_tf.serving.tagging`)."""
        from albert_tf.serving.tagging import MAX_TEXT_BYTES

        if not isinstance(x, str) and not hasattr(x, "__iter__"):
            raise UserError(f"x is {x!r} ({type(x).__name__}): give a string or a list of strings")
        texts = [x] if isinstance(x, str) else list(x)
        for index, text in enumerate(texts):
            if not isinstance(text, str):
                raise UserError(f"x[{index}] is {text!r} ({type(text).__name__}), not a string")
            size = len(text.encode("utf-8", "surrogatepass"))
            if size > MAX_TEXT_BYTES:  # the graph's bound (serve_text's), said as a Python user reads it
                raise UserError(f"x[{index}] is {size:,} bytes long (UTF-8): the tagger takes texts of at most "
                                f"{MAX_TEXT_BYTES:,}; cut it in parts")
        out = {k: v.numpy() for k, v in self._serving()(tf.constant(texts, tf.string)).items()}
        if np.isnan(out["tag_probability"]).any():
            raise UserError("the tagger's outputs are NaN: its weights are not finite (a training that diverged?); "
                            "load it again")
        return out

    def predict(self, x, **kwargs) -> list[list[dict]]:
        """The entities of raw strings `x`: per string a list of `{"text", "type", "start", "end",
        "score"}`, `text == string[start:end]` (character offsets)."""
        out = self.tag(x)
        found = []
        for row, count in enumerate(out["num_entities"].tolist()):
            found.append([{"text": out["entity_text"][row, k].decode("utf-8"),
                           "type": out["entity_type"][row, k].decode("utf-8"),
                           "start": int(out["entity_start"][row, k]), "end": int(out["entity_end"][row, k]),
                           "score": float(out["entity_score"][row, k])} for k in range(count)])
        return found

    # ---- serving -----------------------------------------------------------------------------

    def export(self, path) -> str:
        """A SavedModel whose `serve_text` takes raw strings and returns their entities and tags
        (`albert_tf.serving.tagging`)."""
        from albert_tf.serving.tagging import export_tagger

        return export_tagger(self.tagger, path, self.preprocessor.spm_model_file, self.preprocessor.sequence_length,
                             self.labels, self.doc_stride, do_lower_case=self.preprocessor.do_lower_case)
