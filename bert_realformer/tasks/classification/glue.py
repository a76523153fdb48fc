"""GLUE's tasks in their released TSV files (CoLA, SST-2, MRPC, QQP, STS-B, MNLI, QNLI, RTE,
WNLI) and XNLI, as the original's processors read them."""

from __future__ import annotations

import os

from bert_realformer.errors import InputError
from bert_realformer.tasks.classification.reading import InputExample, Processor, read_tsv


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
