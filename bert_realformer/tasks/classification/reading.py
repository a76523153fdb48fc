"""Classification data in their published formats: GLUE (TSV), XNLI, CLUE (JSON lines),
THUCNews-style `label<TAB>text`, and users' own TSV/CSV/JSON-lines files.

`get_processor(task_name, **options)` returns a processor with `get_train_examples(data_dir)`,
`get_dev_examples(data_dir)`, `get_test_examples(data_dir)` and `get_labels()` (None for
regression). Every error names the file and line.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import logging
import os
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


def _check_file(path):
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
    lines = (line for _, line in read_lines(_check_file(path)))
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
    for number, line in read_lines(_check_file(path)):
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


def _key(obj, key, path, number):
    if key not in obj:
        raise InputError(f"{path}:{number}: missing key {key!r}")
    return obj[key]


def clean_label(value: str | None, where: str, required: bool = True) -> str | None:
    """A label as read, without surrounding whitespace (`1 ` and `1` are one class); said once
    per file when it happens. An empty (or blank) label is an `InputError` naming `where`
    when one is `required` (training and dev files), else None (an unlabelled test example);
    so is a label with a line break (`label_list.txt` holds one label per line)."""
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
    if path not in _LABELS_STRIPPED:
        _LABELS_STRIPPED.add(path)
        logger.warning("%s: label %r has surrounding whitespace; labels are read without it", where, value)
    return value.strip()


_LABELS_STRIPPED: set[str] = set()


class Processor:
    """Reads one task's files. Subclasses define `labels` and `_examples(data_dir, split)`."""
    labels = None
    splits = {"train": "train", "dev": "dev", "test": "test"}

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


class _TsvTask(Processor):
    """A GLUE TSV task: `split_layout(split)` -> (text_a index, text_b index or None, label index or
    None, number of columns, header?)."""
    file_names = {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"}

    def _examples(self, data_dir, split):
        path = os.path.join(data_dir, self.file_names[split])
        a, b, label, width, header = self.split_layout(split)
        examples = []
        for number, fields in read_tsv(path, skip_header=header):
            where = f"{path}:{number}"
            if len(fields) < width:
                raise InputError(f"{where}: expected {width} tab-separated columns, found {len(fields)}")
            examples.append(InputExample(
                guid=f"{split}-{number}", text_a=fields[a], text_b=fields[b] if b is not None else None,
                label=self.test_label() if label is None else fields[label], where=where))
        return examples

    def test_label(self):
        return self.labels[0] if self.labels else "0"


class ColaProcessor(_TsvTask):
    labels = ("0", "1")

    def split_layout(self, split):
        return (1, None, None, 2, True) if split == "test" else (3, None, 1, 4, False)


class Sst2Processor(_TsvTask):
    labels = ("0", "1")

    def split_layout(self, split):
        return (1, None, None, 2, True) if split == "test" else (0, None, 1, 2, True)


class MrpcProcessor(_TsvTask):
    labels = ("0", "1")

    def split_layout(self, split):
        return (3, 4, None if split == "test" else 0, 5, True)


class QqpProcessor(_TsvTask):
    labels = ("0", "1")

    def split_layout(self, split):
        return (1, 2, None, 3, True) if split == "test" else (3, 4, 5, 6, True)


class StsbProcessor(_TsvTask):
    labels = None  # regression: the label is the similarity score

    def split_layout(self, split):
        return (7, 8, None, 9, True) if split == "test" else (7, 8, 9, 10, True)

    def test_label(self):
        return "0"

    def _examples(self, data_dir, split):
        examples = super()._examples(data_dir, split)
        if split != "test":
            for example in examples:
                try:
                    float(example.label)
                except ValueError:
                    raise InputError(f"{example.where}: the score {example.label!r} is not a number") from None
        return examples


class _LastColumnPairTask(_TsvTask):
    """index, sentence1, sentence2, label (QNLI, RTE, WNLI)."""

    def split_layout(self, split):
        return (1, 2, None, 3, True) if split == "test" else (1, 2, 3, 4, True)


class QnliProcessor(_LastColumnPairTask):
    labels = ("entailment", "not_entailment")


class RteProcessor(_LastColumnPairTask):
    labels = ("entailment", "not_entailment")


class WnliProcessor(_LastColumnPairTask):
    labels = ("0", "1")


class MnliProcessor(_TsvTask):
    """MNLI; `mismatched=True` evaluates on dev_mismatched.tsv / test_mismatched.tsv."""
    labels = ("contradiction", "entailment", "neutral")

    def __init__(self, mismatched=False):
        suffix = "mismatched" if mismatched else "matched"
        self.file_names = {"train": "train.tsv", "dev": f"dev_{suffix}.tsv", "test": f"test_{suffix}.tsv"}

    def split_layout(self, split):
        return (8, 9, None, 10, True) if split == "test" else (8, 9, -1, 11, True)


class XnliProcessor(Processor):
    """XNLI for any language (the original hard-coded zh): training data from
    `multinli/multinli.train.<lang>.tsv`, dev from `xnli.dev.tsv` (rows of that language),
    test from `xnli.test.tsv`."""
    labels = ("contradiction", "entailment", "neutral")

    def __init__(self, language="zh"):
        self.language = language

    def _examples(self, data_dir, split):
        examples = []
        if split == "train":
            path = os.path.join(data_dir, "multinli", f"multinli.train.{self.language}.tsv")
            for number, fields in read_tsv(path, skip_header=True):
                where = f"{path}:{number}"
                if len(fields) < 3:
                    raise InputError(f"{where}: expected 3 tab-separated columns, found {len(fields)}")
                label = "contradiction" if fields[2] == "contradictory" else fields[2]
                examples.append(InputExample(f"train-{number}", fields[0], fields[1], label, where))
            return examples
        path = os.path.join(data_dir, f"xnli.{split}.tsv")
        for number, fields in read_tsv(path, skip_header=True):
            where = f"{path}:{number}"
            if len(fields) < 8:
                raise InputError(f"{where}: expected at least 8 tab-separated columns, found {len(fields)}")
            if fields[0] == self.language:
                examples.append(InputExample(f"{split}-{number}", fields[6], fields[7], fields[1], where))
        return examples


class _ClueTask(Processor):
    """A CLUE task in JSON lines: train.json, dev.json, test.json."""
    text_a_key, text_b_key, label_key = "sentence", None, "label"
    skip_labels = ()

    def _examples(self, data_dir, split):
        path = os.path.join(data_dir, f"{split}.json")
        examples = []
        for number, obj in read_jsonl(path):
            where = f"{path}:{number}"
            label = self.labels[0] if split == "test" else str(_key(obj, self.label_key, path, number))
            if label in self.skip_labels:
                continue
            text_a, text_b = self.texts(obj, path, number)
            examples.append(InputExample(f"{split}-{obj.get('id', number)}", text_a, text_b, label, where))
        return examples

    def texts(self, obj, path, number):
        text_b = _key(obj, self.text_b_key, path, number) if self.text_b_key else None
        return _key(obj, self.text_a_key, path, number), text_b


class TnewsProcessor(_ClueTask):
    labels = tuple(str(i) for i in range(100, 117) if i not in (105, 111))


class IflytekProcessor(_ClueTask):
    labels = tuple(str(i) for i in range(119))


class AfqmcProcessor(_ClueTask):
    labels = ("0", "1")
    text_a_key, text_b_key = "sentence1", "sentence2"


class CmnliProcessor(_ClueTask):
    labels = ("contradiction", "entailment", "neutral")
    text_a_key, text_b_key = "sentence1", "sentence2"
    skip_labels = ("-",)  # examples without a gold label


class OcnliProcessor(CmnliProcessor):
    pass


class CslProcessor(_ClueTask):
    """CSL: the keywords (space-joined) as text A, the abstract as text B."""
    labels = ("0", "1")

    def texts(self, obj, path, number):
        keywords = _key(obj, "keyword", path, number)
        return " ".join(keywords) if isinstance(keywords, list) else str(keywords), _key(obj, "abst", path, number)


def sort_labels(labels):
    """Labels collected from data, sorted: as integers when they all are ("2" before "10"),
    else as strings."""
    labels = list(labels)
    if labels and all(re.fullmatch(r"-?\d+", label) for label in labels):
        return sorted(labels, key=int)
    return sorted(labels)


class _LabelsFromData(Processor):
    """A task whose label list comes from its data (`set_labels_from(data_dir)`)."""
    _labels = None

    def get_labels(self):
        if self._labels is None:
            raise InputError("the label list is not known yet: call set_labels_from(data_dir) first")
        return list(self._labels)


class GenericProcessor(_LabelsFromData):
    """Users' own data: `train`, `dev`, `test` files in TSV, CSV or JSON lines with named text
    and label columns (TSV/CSV: a header row names them). The labels come from `label_file`
    (one per line) or are collected from the training file and sorted (as integers when they
    all are). TSV and CSV files start with a header row naming the columns."""

    def __init__(self, data_format="tsv", text_a_column="text", text_b_column=None,
                 label_column="label", label_file=None):
        if data_format not in ("tsv", "csv", "jsonl"):
            raise InputError(f"--data_format={data_format}: expected tsv, csv or jsonl")
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
            value = row.get(label) if split == "test" else _key(row, label, path, number)
            where = f"{path}:{number}"
            examples.append(InputExample(
                f"{split}-{number}", str(_key(row, text_a, path, number)),
                str(_key(row, text_b, path, number)) if text_b else None,
                clean_label(str(value), where, required=split != "test") if value is not None else None, where))
        return examples

    def set_labels_from(self, data_dir):
        """Reads `label_file`, or collects the labels of the training file."""
        if self.label_file:
            labels = [line.strip() for _, line in read_lines(_check_file(self.label_file)) if line.strip()]
            if not labels:
                raise InputError(f"{self.label_file}: no labels")
            self._labels = labels
        else:
            path = self._path(data_dir, "train")
            label = self.columns[2]
            self._labels = sort_labels({clean_label(str(_key(row, label, path, n)), f"{path}:{n}")
                                        for n, row in self._rows(path)})
            if not self._labels:
                raise InputError(f"{path}: the train split has no examples")
        return self.get_labels()


class ThucnewsProcessor(_LabelsFromData):
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
                                         clean_label(label, where, required=split != "test"), where))
        return examples

    def set_labels_from(self, data_dir):
        self._labels = list(dict.fromkeys(e.label for e in self._examples(data_dir, "train")))
        return self.get_labels()


PROCESSORS = {
    "cola": ColaProcessor, "sst-2": Sst2Processor, "sst2": Sst2Processor, "mrpc": MrpcProcessor,
    "qqp": QqpProcessor, "sts-b": StsbProcessor, "stsb": StsbProcessor, "mnli": MnliProcessor,
    "mnli-mm": lambda **_: MnliProcessor(mismatched=True), "qnli": QnliProcessor,
    "rte": RteProcessor, "wnli": WnliProcessor, "xnli": XnliProcessor,
    "tnews": TnewsProcessor, "iflytek": IflytekProcessor, "afqmc": AfqmcProcessor,
    "cmnli": CmnliProcessor, "ocnli": OcnliProcessor, "csl": CslProcessor,
    "thucnews": ThucnewsProcessor, "generic": GenericProcessor,
}


def get_processor(task_name: str, data_dir: str | None = None, **options) -> Processor:
    """The processor for `task_name` (case-insensitive). Options: `language` (xnli),
    `mismatched` (mnli), the generic-data options. Tasks whose labels come from the data
    (thucnews, generic) read them from `data_dir`."""
    name = (task_name or "").lower()
    if name not in PROCESSORS:
        raise InputError(f"--task_name={task_name}: unknown task; known tasks: {', '.join(sorted(PROCESSORS))}")
    factory = PROCESSORS[name]
    accepted = {"xnli": ("language",), "mnli": ("mismatched",),
                "generic": ("data_format", "text_a_column", "text_b_column", "label_column", "label_file")}
    kwargs = {k: v for k, v in options.items() if k in accepted.get(name, ()) and v is not None}
    processor = factory(**kwargs)
    if hasattr(processor, "set_labels_from") and data_dir is not None:
        processor.set_labels_from(data_dir)
    return processor
