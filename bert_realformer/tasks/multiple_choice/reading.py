"""Multiple-choice data (`--task_name`), every error naming the file and line:
* `swag`: SWAG's CSV files as released (`train.csv`, `val.csv`, `test.csv`; columns `sent1`
  the context, `sent2` the start of the ending, `ending0`..`ending3`, `label`, none in test);
* `generic`: JSON lines `{"context": ..., "question": ... (optional), "choices": [...],
  "label": int}` in `train.jsonl`, `dev.jsonl`, `test.jsonl`, any number of choices >= 2 (the
  question, when there is one, starts every ending).
"""

from __future__ import annotations

import csv
import dataclasses
import os
import types

from bert_realformer import storage
from bert_realformer.errors import InputError
from bert_realformer.tasks.classification.reading import read_jsonl
from bert_realformer.text_files import read_lines

FILES = types.MappingProxyType({"swag": {"train": "train.csv", "dev": "val.csv", "test": "test.csv"},
         "generic": {"train": "train.jsonl", "dev": "dev.jsonl", "test": "test.jsonl"}})
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
        raise InputError(f"task_name={task_name}: unknown task; known tasks: {', '.join(sorted(FILES))}",
                         options=("task_name",))
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
