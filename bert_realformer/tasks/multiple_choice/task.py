"""Multiple choice (SWAG, as in the BERT paper) for the training driver: data, features, the
loss, predictions and results.

Each choice is scored as its own sequence `[CLS] context [SEP] start-of-ending + ending [SEP]`
(truncated as the original classifier truncates a pair); a softmax over the choices gives the
answer. Data (`--task_name`):
* `swag`: SWAG's CSV files as released (`train.csv`, `val.csv`, `test.csv`; columns `sent1`
  the context, `sent2` the start of the ending, `ending0`..`ending3`, `label`, none in test);
* `generic`: JSON lines `{"context": ..., "question": ... (optional), "choices": [...],
  "label": int}` in `train.jsonl`, `dev.jsonl`, `test.jsonl`, any number of choices >= 2 (the
  question, when there is one, starts every ending). Examples with fewer choices than others
  are padded with choices that cannot be chosen.
Every error names the file and line.
"""

from __future__ import annotations

import csv
import dataclasses
import os
from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf

from bert_realformer import storage
from bert_realformer.errors import InputError
from bert_realformer.tasks.classification.reading import read_jsonl
from bert_realformer.tasks.sequences import pack
from bert_realformer.text_files import read_lines
from bert_realformer.training.driver import TrainingTask
from bert_realformer.training.padding import trim_to_longest
from bert_realformer.training.per_example import example_totals, loss_share, num_train_steps, training_batches

if TYPE_CHECKING:  # annotations only
    from bert_realformer.training.driver import Driver
    from tokenization import FullTokenizer

FILES = {"swag": {"train": "train.csv", "dev": "val.csv", "test": "test.csv"},
         "generic": {"train": "train.jsonl", "dev": "dev.jsonl", "test": "test.jsonl"}}
SWAG_ENDINGS = 4


@dataclasses.dataclass
class ChoiceExample:
    context: str
    start: str            # the start of every ending ("" when there is none)
    choices: list
    label: int | None
    where: str            # "file:line"


def data_path(data_dir, task_name, split):
    if task_name not in FILES:
        raise InputError(f"--task_name={task_name}: unknown task; known tasks: {', '.join(sorted(FILES))}")
    path = os.path.join(data_dir, FILES[task_name][split])
    if not storage.isfile(path):
        raise InputError(f"{path}: no such file")
    return path


def read_swag(path, labelled=True):
    columns = ["sent1", "sent2"] + [f"ending{i}" for i in range(SWAG_ENDINGS)] + (["label"] if labelled else [])
    examples = []
    reader = csv.DictReader(line for _, line in read_lines(path))
    missing = [c for c in columns if c not in (reader.fieldnames or [])]
    if missing:
        raise InputError(f"{path}:1: missing column(s) {', '.join(missing)}")
    for row in reader:
        where = f"{path}:{reader.line_num}"
        label = _label(row["label"], SWAG_ENDINGS, where) if labelled else None
        examples.append(ChoiceExample(row["sent1"], row["sent2"],
                                      [row[f"ending{i}"] for i in range(SWAG_ENDINGS)], label, where))
    return examples


def _label(value, num_choices, where):
    try:
        label = int(value)
    except (TypeError, ValueError):
        raise InputError(f"{where}: label {value!r} is not a choice number") from None
    if not 0 <= label < num_choices:
        raise InputError(f"{where}: label {label} is not one of the {num_choices} choices")
    return label


def read_generic(path, labelled=True):
    examples = []
    for number, obj in read_jsonl(path):
        where = f"{path}:{number}"
        choices = obj.get("choices")
        if not isinstance(obj.get("context"), str):
            raise InputError(f"{where}: expected \"context\": a string")
        if not isinstance(choices, list) or len(choices) < 2 or not all(isinstance(c, str) for c in choices):
            raise InputError(f"{where}: expected \"choices\": a list of at least 2 strings")
        label = None
        if labelled or "label" in obj:
            if "label" not in obj:
                raise InputError(f"{where}: missing key 'label'")
            label = _label(obj["label"], len(choices), where)
        examples.append(ChoiceExample(obj["context"], obj.get("question") or "", choices, label, where))
    return examples


def read_examples(data_dir, task_name, split):
    """The split's examples (test files need no labels)."""
    path = data_path(data_dir, task_name, split)
    reader = read_swag if task_name == "swag" else read_generic
    examples = reader(path, labelled=split != "test")
    if not examples:
        raise InputError(f"{path}: no examples")
    return examples


def choice_arrays(examples, tokenizer, max_seq_length):
    """{input_ids, input_mask, segment_ids: [N, C, S], choice_mask: [N, C], label_ids: [N]}
    with C the most choices of any example (label -1 where there is none)."""
    num_choices = max(len(e.choices) for e in examples)
    shape = (len(examples), num_choices, max_seq_length)
    arrays = {name: np.zeros(shape, "int32") for name in ("input_ids", "input_mask", "segment_ids")}
    arrays["choice_mask"] = np.zeros(shape[:2], "int32")
    arrays["label_ids"] = np.array([-1 if e.label is None else e.label for e in examples], "int32")
    cls, sep = tokenizer.vocab["[CLS]"], tokenizer.vocab["[SEP]"]
    for n, example in enumerate(examples):
        context = tokenizer.tokenize_to_ids(example.context)
        for c, choice in enumerate(example.choices):
            ending = tokenizer.tokenize_to_ids(f"{example.start} {choice}".strip())
            ids, segments = pack(context, ending, max_seq_length, cls, sep)
            arrays["input_ids"][n, c, :len(ids)] = ids
            arrays["input_mask"][n, c, :len(ids)] = 1
            arrays["segment_ids"][n, c, :len(ids)] = segments
            arrays["choice_mask"][n, c] = 1
    return arrays


def choice_loss_fn(model, features, step, totals):
    """This replica's share of the batch's mean cross-entropy over the choices."""
    scores = model(features, training=True)
    nll = -tf.gather(tf.nn.log_softmax(scores, axis=-1), features["label_ids"], batch_dims=1)
    return loss_share(tf.reduce_sum(nll), totals["examples"])


def choice_training(examples: list[ChoiceExample], tokenizer: FullTokenizer, max_seq_length: int, batch_size: int,
                    learning_rate: float, num_train_epochs: float, warmup_proportion: float,
                    accumulation_steps: int = 1, seed: int = 12345, shuffle_buffer_size: int = 0) -> TrainingTask:
    """The `TrainingTask`: `int(examples / batch size * epochs)` steps, the examples in a new
    order every epoch (`training_batches`)."""
    arrays = choice_arrays(examples, tokenizer, max_seq_length)
    steps = num_train_steps(len(examples), batch_size, num_train_epochs, accumulation_steps)

    def dataset_fn(start):
        return training_batches(tf.data.Dataset.from_tensor_slices(arrays), batch_size, seed, start,
                                len(examples), shuffle_buffer_size)

    return TrainingTask(loss_fn=choice_loss_fn, totals_fn=example_totals, dataset_fn=dataset_fn,
                        batch_size=batch_size, learning_rate=learning_rate, num_train_steps=steps,
                        num_warmup_steps=int(steps * warmup_proportion))


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


def evaluation_results(examples, probabilities, global_step):
    """`eval_accuracy`, `eval_loss` (mean -log p(answer)), `global_step`."""
    labels = np.array([e.label for e in examples])
    chosen = probabilities[np.arange(len(labels)), labels]
    return {"eval_accuracy": float(np.mean(probabilities.argmax(-1) == labels)),
            "eval_loss": float(np.mean(-np.log(np.maximum(chosen, 1e-30)))), "global_step": global_step}


def test_rows(examples, probabilities):
    """Each example's choice probabilities without its padding choices (test_results.tsv)."""
    return [row[:len(example.choices)] for example, row in zip(examples, probabilities, strict=True)]

