"""Multiple choice (SWAG, as in the BERT paper) as a fine-tuning task: the loss (a softmax over
the choices' scores), the training task, the choice probabilities, and `MultipleChoiceTask`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf

import modeling
from bert_realformer.finetuning.contract import Evaluation, FinetuningTask, TaskData, TaskOptions
from bert_realformer.finetuning.schedule import Schedule, example_totals, loss_share
from bert_realformer.tasks.multiple_choice.features import choice_arrays
from bert_realformer.tasks.multiple_choice.metrics import REPORTED, evaluation_results, test_rows
from bert_realformer.tasks.multiple_choice.reading import ChoiceExample, read_examples
from bert_realformer.tasks.outputs import write_test_results
from bert_realformer.tasks.registry import register
from bert_realformer.training.driver import TrainingTask

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
        data = data.map(driver.trim)
    return driver.predict(data, choice_probabilities)["p"]


def choice_probabilities(model, features):
    """The prediction step's outputs: each choice's probability {"p": [B, C]}."""
    return {"p": tf.nn.softmax(model(features, training=False), axis=-1)}


@register("multiple_choice")
class MultipleChoiceTask(FinetuningTask):
    """SWAG's CSV files or JSON lines (`task_name`: swag or generic) in `data_dir`: a softmax
    over the choices' scores; test_results.tsv holds each test example's choice probabilities."""

    metrics = REPORTED

    def __init__(self, options: TaskOptions, *, data_dir: str, task_name: str):
        super().__init__(options)
        self.data_dir = data_dir
        self.task_name = task_name
        self._choices = None

    def read(self, splits: Sequence[str]) -> TaskData:
        data = TaskData(**{split: read_examples(self.data_dir, self.task_name, split) for split in splits})
        if data.train is not None:
            self._choices = max(len(example.choices) for example in data.train)
        return data

    def build_model(self, config):
        return modeling.BertMultipleChoice(config)

    @property
    def num_classes(self):
        return self._choices

    def training_task(self, examples, tokenizer, schedule):
        return training_task(examples, tokenizer, self.options.max_seq_length, schedule)

    def predict(self, driver, tokenizer, examples, split):
        return predict_probabilities(driver, examples, tokenizer, self.options.max_seq_length,
                                     self.options.batch_size(split), self.options.dynamic_padding)

    def evaluate(self, examples, probabilities, step, selection):
        return Evaluation(evaluation_results(examples, probabilities, step), probabilities, probabilities.argmax(-1))

    def write_predictions(self, examples, probabilities, split):
        if split != "test":
            return []
        return write_test_results(test_rows(examples, probabilities), self.options.output_dir)
