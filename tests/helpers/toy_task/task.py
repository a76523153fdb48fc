"""The toy task: the contract's methods over a tiny text file format (docs/adding-a-task.md)."""

import os

import numpy as np
import tensorflow as tf

import modeling
from bert_realformer import storage
from bert_realformer.errors import InputError
from bert_realformer.finetuning.contract import Evaluation, FinetuningTask, TaskData
from bert_realformer.finetuning.schedule import example_totals, loss_share
from bert_realformer.inference.padding import trim_to_longest
from bert_realformer.tasks.registry import register
from bert_realformer.tasks.sequences import pack
from bert_realformer.text_files import read_lines

LABELS = ("no", "yes")
PREDICTIONS = "toy_predictions.txt"


def _loss_fn(model, features, step, totals):
    log_probs = tf.nn.log_softmax(model(features, training=True), axis=-1)
    nll = -tf.gather(log_probs, features["label_ids"], batch_dims=1)
    return loss_share(tf.reduce_sum(nll), totals["examples"])


def _probabilities(model, features):
    return {"p": tf.nn.softmax(model(features, training=False), axis=-1)}


@register("toy")
class ToyTask(FinetuningTask):
    metrics = ("eval_accuracy", "eval_loss")

    def __init__(self, options, *, data_dir):
        super().__init__(options)
        self.data_dir = data_dir

    def read(self, splits):
        examples = {}
        for split in splits:
            path = os.path.join(self.data_dir, f"{split}.txt")
            examples[split] = []
            for number, line in read_lines(path):
                label, _, text = line.rstrip("\n").partition("\t")
                if label not in LABELS:
                    raise InputError(f"{path}:{number}: label {label!r}, expected one of {', '.join(LABELS)}")
                examples[split].append((text, LABELS.index(label)))
        return TaskData(**examples)

    @property
    def num_classes(self):
        return len(LABELS)

    def build_model(self, config):
        return modeling.BertClassifier(config, num_labels=len(LABELS))

    def _arrays(self, examples, tokenizer):
        """{input_ids, input_mask, segment_ids: [N, max_seq_length], label_ids: [N]} int32."""
        length = self.options.max_seq_length
        arrays = {name: np.zeros((len(examples), length), "int32")
                  for name in ("input_ids", "input_mask", "segment_ids")}
        for row, (text, _) in enumerate(examples):
            ids, _ = pack(tokenizer.tokenize_to_ids(text), None, length, tokenizer.vocab["[CLS]"],
                          tokenizer.vocab["[SEP]"])
            arrays["input_ids"][row, :len(ids)] = ids
            arrays["input_mask"][row, :len(ids)] = 1
        arrays["label_ids"] = np.array([label for _, label in examples], "int32")
        return arrays

    def training_task(self, examples, tokenizer, schedule):
        data = tf.data.Dataset.from_tensor_slices(self._arrays(examples, tokenizer))
        return schedule.training_task(len(examples), _loss_fn, example_totals,
                                      lambda start: schedule.batches(data, start, len(examples)),
                                      summary=f"toy: {len(examples)} texts")

    def predict(self, driver, tokenizer, examples, split):
        data = tf.data.Dataset.from_tensor_slices(self._arrays(examples, tokenizer))
        data = data.batch(self.options.batch_size(split))
        return driver.predict(data.map(trim_to_longest) if self.options.dynamic_padding else data,
                              _probabilities)["p"]

    def evaluate(self, examples, probabilities, step, selection):
        labels = np.array([label for _, label in examples])
        chosen = probabilities[np.arange(len(labels)), labels]
        result = {"eval_accuracy": float(np.mean(probabilities.argmax(-1) == labels)),
                  "eval_loss": float(np.mean(-np.log(chosen))), "global_step": step}
        return Evaluation(result, probabilities, probabilities.argmax(-1))

    def write_predictions(self, examples, probabilities, split):
        if split != "test":
            return []
        path = os.path.join(self.options.output_dir, PREDICTIONS)
        storage.write_atomic(path, "".join(f"{LABELS[i]}\n" for i in probabilities.argmax(-1)))
        return [path]
