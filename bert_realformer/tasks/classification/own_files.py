"""Users' own classification files: TSV, CSV or JSON lines with named columns (`generic`), and
THUCNews-style `label<TAB>text` lines (`thucnews`); their labels come from the data."""

from __future__ import annotations

import os

from bert_realformer import storage
from bert_realformer.errors import InputError
from bert_realformer.tasks.classification.reading import (
    InputExample,
    LabelsFromData,
    existing_file,
    read_jsonl,
    read_tsv,
    required_field,
    sort_labels,
)
from bert_realformer.text_files import read_lines


class GenericProcessor(LabelsFromData):
    """Users' own data: `train`, `dev`, `test` files in TSV, CSV or JSON lines with named text
    and label columns (TSV/CSV: a header row names them). The labels come from `label_file`
    (one per line) or are collected from the training file and sorted (as integers when they
    all are). TSV and CSV files start with a header row naming the columns."""

    def __init__(self, data_format="tsv", text_a_column="text", text_b_column=None,
                 label_column="label", label_file=None):
        if data_format not in ("tsv", "csv", "jsonl"):
            raise InputError(f"data_format={data_format}: expected tsv, csv or jsonl", options=("data_format",))
        self.data_format = data_format
        self.columns = (text_a_column, text_b_column, label_column)
        self.label_file = label_file

    def _path(self, data_dir, split):
        return os.path.join(data_dir, f"{split}.{self.data_format}")

    def _flag(self, column):
        text_a, text_b, _ = self.columns
        return "text_a_column" if column == text_a else "text_b_column" if column == text_b else "label_column"

    def _rows(self, path, split="train"):
        if self.data_format == "jsonl":
            return read_jsonl(path)
        rows = read_tsv(path, delimiter="\t" if self.data_format == "tsv" else ",")
        if not rows:
            return []
        header = rows[0][1]
        text_a, text_b, label = self.columns
        for column in (text_a, text_b, None if split == "test" else label):
            if column is not None and column not in header:
                raise InputError(f"no column {column!r} in the header of {path} (columns: {', '.join(header)}); "
                                 f"the first line names the columns (see --{self._flag(column)})")
        out = []
        for number, fields in rows[1:]:
            if len(fields) != len(header):
                raise InputError(f"{path}:{number}: expected {len(header)} columns as in the header, "
                                 f"found {len(fields)}")
            out.append((number, dict(zip(header, fields))))
        return out

    def _examples(self, data_dir, split):
        path = self._path(data_dir, split)
        text_a, text_b, label = self.columns
        examples = []
        for number, row in self._rows(path, split):
            value = row.get(label) if split == "test" else required_field(row, label, path, number)
            where = f"{path}:{number}"
            examples.append(InputExample(
                f"{split}-{number}", str(required_field(row, text_a, path, number)),
                str(required_field(row, text_b, path, number)) if text_b else None,
                self._field_label(value, where, required=split != "test"), where))
        return examples

    def _field_label(self, value, where, required=True):
        """The example's label from its label field's value (None: a test example without one)."""
        return None if value is None else self._label(str(value), where, required=required)

    def _names_of(self, label) -> tuple[str, ...]:
        """The label names an example's label holds (one)."""
        return (label,)

    def set_labels_from(self, data_dir):
        """Reads `label_file`, or collects the labels of the training file."""
        if self.label_file:
            labels = [line.strip() for _, line in read_lines(existing_file(self.label_file)) if line.strip()]
            if not labels:
                raise InputError(f"{self.label_file}: no labels")
            self._labels = labels
        else:
            path = self._path(data_dir, "train")
            label = self.columns[2]
            self._labels = sort_labels({name for n, row in self._rows(path) for name in self._names_of(
                self._field_label(required_field(row, label, path, n), f"{path}:{n}"))})
            if not self._labels:
                raise InputError(f"{path}: the train split has no examples")
        return self.get_labels()


class ThucnewsProcessor(LabelsFromData):
    """THUCNews-style topic data: `label<TAB>text` per line in train/dev/test files (`.tsv`,
    `.txt`, or the `cnews.train.txt` / `cnews.val.txt` / `cnews.test.txt` of the popular split).
    The labels are collected from the training file in order of first appearance."""
    names = {"train": ("train.tsv", "train.txt", "cnews.train.txt"),
             "dev": ("dev.tsv", "dev.txt", "cnews.val.txt"),
             "test": ("test.tsv", "test.txt", "cnews.test.txt")}

    def _path(self, data_dir, split):
        for name in self.names[split]:
            path = os.path.join(data_dir, name)
            if storage.isfile(path):
                return path
        raise InputError(f"{data_dir}: no {split} file (looked for {', '.join(self.names[split])})")

    def _examples(self, data_dir, split):
        path = self._path(data_dir, split)
        examples = []
        for number, line in read_lines(path):
            line = line.rstrip("\r\n")
            if not line.strip():
                continue
            if "\t" not in line:
                raise InputError(f"{path}:{number}: expected label<TAB>text")
            label, text = line.split("\t", 1)
            where = f"{path}:{number}"
            examples.append(InputExample(f"{split}-{number}", text, None,
                                         self._label(label, where, required=split != "test"), where))
        return examples

    def set_labels_from(self, data_dir):
        self._labels = list(dict.fromkeys(e.label for e in self._examples(data_dir, "train")))
        return self.get_labels()
