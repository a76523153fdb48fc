"""CLUE's classification tasks in their released JSON lines (TNEWS, IFLYTEK, AFQMC, CMNLI,
OCNLI, CSL)."""

from __future__ import annotations

import os

from bert_realformer.tasks.classification.reading import InputExample, Processor, read_jsonl, required_field


class _ClueTask(Processor):
    """A CLUE task in JSON lines: train.json, dev.json, test.json."""
    text_a_key, text_b_key, label_key = "sentence", None, "label"
    skip_labels = ()

    def _examples(self, data_dir, split):
        path = os.path.join(data_dir, f"{split}.json")
        examples = []
        for number, obj in read_jsonl(path):
            where = f"{path}:{number}"
            label = self.labels[0] if split == "test" else str(required_field(obj, self.label_key, path, number))
            if label in self.skip_labels:
                continue
            text_a, text_b = self.texts(obj, path, number)
            examples.append(InputExample(f"{split}-{obj.get('id', number)}", text_a, text_b, label, where))
        return examples

    def texts(self, obj, path, number):
        text_b = required_field(obj, self.text_b_key, path, number) if self.text_b_key else None
        return required_field(obj, self.text_a_key, path, number), text_b


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
        keywords = required_field(obj, "keyword", path, number)
        keywords = " ".join(keywords) if isinstance(keywords, list) else str(keywords)
        return keywords, required_field(obj, "abst", path, number)
