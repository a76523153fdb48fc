"""Reading classification data: the example, the file formats (TSV, JSON lines), labels, and
the `Processor` every task's reader is (`glue`, `clue`, `own_files`; by name: `processors`).

A processor has `get_train_examples(data_dir)`, `get_dev_examples(data_dir)`,
`get_test_examples(data_dir)` and `get_labels()` (None for regression). Every error names the
file and line.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import logging
import re

from bert_realformer import storage
from bert_realformer.errors import InputError
from bert_realformer.text_files import read_lines

logger = logging.getLogger(__name__)


@dataclasses.dataclass
class InputExample:
    guid: str
    text_a: str
    text_b: str = None
    label: str = None     # a label string; for regression, the score as a string
    where: str = ""       # "file:line", for error messages


def existing_file(path):
    if not storage.isfile(path):
        raise InputError(f"{path}: no such file")
    return path


# csv's default limit on a field (131,072 characters) would refuse a long document's text.
csv.field_size_limit(2**31 - 1)


def read_tsv(path, skip_header=False, delimiter="\t"):
    """[(line number, fields)] as the original `_read_tsv` (csv, no quoting for TSV); fields of
    any length."""
    rows = []
    quoting = csv.QUOTE_NONE if delimiter == "\t" else csv.QUOTE_MINIMAL
    lines = (line for _, line in read_lines(existing_file(path)))
    for number, fields in enumerate(csv.reader(lines, delimiter=delimiter, quoting=quoting), start=1):
        if number == 1 and skip_header:
            continue
        if fields:
            rows.append((number, fields))
    return rows


# Half of a UTF-16 pair on its own: what a JSON escape of a truncated emoji decodes to.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def read_jsonl(path):
    """[(line number, object)]; one JSON object per line (blank lines skipped); lone
    surrogates in its strings (scraped text with truncated emoji) are dropped."""
    rows = []
    for number, line in read_lines(existing_file(path)):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(f"{path}:{number}: not valid JSON ({error.msg})") from None
        if not isinstance(value, dict):
            raise InputError(f"{path}:{number}: expected a JSON object")
        rows.append((number, {k: _LONE_SURROGATE.sub("", v) if isinstance(v, str) else v for k, v in value.items()}))
    return rows


def required_field(obj, key, path, number):
    if key not in obj:
        raise InputError(f"{path}:{number}: missing key {key!r}")
    return obj[key]


def clean_label(value: str | None, where: str, required: bool = True, said: set[str] | None = None) -> str | None:
    """A label as read, without surrounding whitespace (`1 ` and `1` are one class); said once
    per file when it happens (the files in `said`, which this adds to, are not told again). An
    empty (or blank) label is an `InputError` naming `where` when one is `required` (training
    and dev files), else None (an unlabelled test example); so is a label with a line break
    (`label_list.txt` holds one label per line)."""
    if value is None:
        return None
    if not value.strip():
        if required:
            raise InputError(f"{where}: empty label (every training and dev example needs one)")
        return None
    if "\n" in value or "\r" in value:
        raise InputError(f"{where}: label {value!r} holds a line break")
    if value == value.strip():
        return value
    path = where.rsplit(":", 1)[0]
    if said is None or path not in said:
        logger.warning("%s: label %r has surrounding whitespace; labels are read without it", where, value)
    if said is not None:
        said.add(path)
    return value.strip()


class Processor:
    """Reads one task's files. Subclasses define `labels` and `_examples(data_dir, split)`."""
    labels = None
    splits = {"train": "train", "dev": "dev", "test": "test"}

    def _label(self, value: str | None, where: str, required: bool = True) -> str | None:
        """`clean_label`, saying once per file of this processor's that a label was stripped."""
        if not hasattr(self, "_stripped_files"):
            self._stripped_files = set()
        return clean_label(value, where, required, self._stripped_files)

    def get_labels(self):
        return list(self.labels) if self.labels is not None else None

    def get_train_examples(self, data_dir):
        return self._checked(self._examples(data_dir, "train"), data_dir, "train")

    def get_dev_examples(self, data_dir):
        return self._checked(self._examples(data_dir, "dev"), data_dir, "dev")

    def get_test_examples(self, data_dir):
        return self._checked(self._examples(data_dir, "test"), data_dir, "test")

    def _checked(self, examples, data_dir, split):
        if not examples:
            raise InputError(f"{data_dir}: the {split} split has no examples")
        labels = self.get_labels()
        if labels is None:
            return examples
        known = set(labels)
        unknown = [example for example in examples if example.label not in known]
        if unknown and split != "test":
            raise InputError(f"{unknown[0].where}: unknown label {unknown[0].label!r}; expected one of "
                             f"{', '.join(labels[:20])}{' ...' if len(labels) > 20 else ''}")
        # Test labels are not used (predictions only): a missing one, or one outside the label
        # list (a class the training split lacks), stands in as the first label, as the original's
        # placeholder test labels do.
        outside = sum(example.label is not None for example in unknown)
        if outside:
            logger.info("%s: %d test labels are not in the label list (test labels are not used)", data_dir, outside)
        for example in unknown:
            example.label = labels[0]
        return examples


def sort_labels(labels):
    """Labels collected from data, sorted: as integers when they all are ("2" before "10"),
    else as strings."""
    labels = list(labels)
    if labels and all(re.fullmatch(r"-?\d+", label) for label in labels):
        return sorted(labels, key=int)
    return sorted(labels)


class LabelsFromData(Processor):
    """A task whose label list comes from its data (`set_labels_from(data_dir)`)."""
    _labels = None

    def get_labels(self):
        if self._labels is None:
            raise InputError("the label list is not known yet: call set_labels_from(data_dir) first")
        return list(self._labels)
