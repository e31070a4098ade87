"""Task models that are not specific to one task: the ALBERT encoder with a head on top.

- `AlbertClassifier`: pooled output -> dropout -> dense (GLUE; STS-B with one output).
- `AlbertSpanLabeler`: every position's final state -> start and end logits (SQuAD v1.1).
- `AlbertSquadV2`: the release's answerability head: a start beam, ends conditioned on each start
  and a no-answer logit (SQuAD v2.0).
- `AlbertMultipleChoice`: each choice's pooled output -> dropout -> one logit (RACE).
- `AlbertTokenClassifier`: every position's final state -> dropout -> dense (named entities).

Each keeps the encoder as `encoder` (read also as `backbone`, keras-hub's name), so
`albert_tf.presets.loader` loads pretrained weights into any of them, and each is a registered,
serializable Keras model (`from_config(get_config())` and `.keras` files rebuild it exactly).
"""

from albert_tf.models.classifier import AlbertClassifier, classifier_sums
from albert_tf.models.multiple_choice import AlbertMultipleChoice
from albert_tf.models.span_labeler import AlbertSpanLabeler
from albert_tf.models.squad_v2 import AlbertSquadV2
from albert_tf.models.token_classifier import AlbertTokenClassifier, token_classifier_sums

__all__ = ["AlbertClassifier", "AlbertMultipleChoice", "AlbertSpanLabeler", "AlbertSquadV2", "AlbertTokenClassifier",
           "classifier_sums", "token_classifier_sums"]
