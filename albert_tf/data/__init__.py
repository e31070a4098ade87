"""Records: the TFRecord feature specs (`features`), records written without TensorFlow
(`tfrecord`), and the tf.data readers of pretraining records (`datasets`)."""
