"""Multiple choice (SWAG, as in the BERT paper) for the training driver: the loss (a softmax
over the choices' scores), the training task and the choice probabilities.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf

from bert_realformer.tasks.multiple_choice.features import choice_arrays
from bert_realformer.tasks.multiple_choice.reading import ChoiceExample
from bert_realformer.training.driver import TrainingTask
from bert_realformer.training.padding import trim_to_longest
from bert_realformer.training.per_example import Schedule, example_totals, loss_share

if TYPE_CHECKING:  # annotations only
    from bert_realformer.training.driver import Driver
    from tokenization import FullTokenizer


def choice_loss_fn(model, features, step, totals):
    """This replica's share of the batch's mean cross-entropy over the choices."""
    scores = model(features, training=True)
    nll = -tf.gather(tf.nn.log_softmax(scores, axis=-1), features["label_ids"], batch_dims=1)
    return loss_share(tf.reduce_sum(nll), totals["examples"])


def training_task(examples: list[ChoiceExample], tokenizer: FullTokenizer, max_seq_length: int,
                  schedule: Schedule) -> TrainingTask:
    """The `TrainingTask`: `int(examples / batch size * epochs)` steps, the examples in a new
    order every epoch (`Schedule.batches`)."""
    arrays = choice_arrays(examples, tokenizer, max_seq_length)
    return schedule.training_task(
        len(examples), choice_loss_fn, example_totals,
        lambda start: schedule.batches(tf.data.Dataset.from_tensor_slices(arrays), start, len(examples)),
        summary=f"training on {len(examples)} examples")


def predict_probabilities(driver: Driver, examples: list[ChoiceExample], tokenizer: FullTokenizer,
                          max_seq_length: int, batch_size: int, dynamic_padding: bool = True) -> np.ndarray:
    """Choice probabilities [N, C] (0 for padding choices), in order; each batch cut to its
    longest sequence (`dynamic_padding`)."""
    arrays = choice_arrays(examples, tokenizer, max_seq_length)
    data = tf.data.Dataset.from_tensor_slices(arrays).batch(batch_size)
    if dynamic_padding:
        data = data.map(trim_to_longest)
    out = driver.predict(data, lambda model, f: {"p": tf.nn.softmax(model(f, training=False), axis=-1)})
    return out["p"]
