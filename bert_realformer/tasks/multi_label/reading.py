"""Multi-label examples from `generic` files: in TSV and CSV the label column holds an example's
labels separated by a separator (`,` by default; an empty field: no label), in JSON lines a list
of labels (a string is split as in TSV). An example's label is a tuple of label names, in the
order given, each once. The label set comes from `label_file` or from the training file."""

from __future__ import annotations

import logging

from bert_realformer.errors import InputError
from bert_realformer.tasks.classification.own_files import GenericProcessor
from bert_realformer.tasks.classification.reading import existing_file
from bert_realformer.text_files import read_lines

logger = logging.getLogger(__name__)


class MultiLabelProcessor(GenericProcessor):
    """`GenericProcessor` whose examples hold tuples of labels (see the module docstring)."""

    def __init__(self, label_separator: str = ",", **options):
        super().__init__(**options)
        if not label_separator:
            raise InputError("label_separator: expected a separator between labels, got an empty one",
                             options=("label_separator",))
        self.label_separator = label_separator

    def _field_label(self, value, where, required=True) -> tuple[str, ...]:
        if value is None:
            return ()
        if isinstance(value, list):
            parts = value
        elif isinstance(value, str):
            parts = value.split(self.label_separator)
        else:
            raise InputError(f"{where}: expected a list of labels (or a string of them separated by "
                             f"{self.label_separator!r}), got {value!r}")
        names = [self._label(str(part), where, required=False) for part in parts]
        return tuple(dict.fromkeys(name for name in names if name))

    def _names_of(self, label):
        return label

    def set_labels_from(self, data_dir):
        if self.label_file:
            for number, line in read_lines(existing_file(self.label_file)):
                if self.label_separator in line.strip():
                    raise InputError(f"{self.label_file}:{number}: label {line.strip()!r} holds the label separator "
                                     f"{self.label_separator!r}, so no example can name it: rename it, or choose "
                                     "another label_separator", options=("label_separator",))
        try:
            return super().set_labels_from(data_dir)
        except InputError as error:
            path = self._path(data_dir, "train")
            if self.label_file or "has no examples" not in str(error) or not self._rows(path):
                raise
            raise InputError(f"{path}: no example has a label; a multi-label task needs each example's labels "
                             f"separated by {self.label_separator!r}") from None

    def _checked(self, examples, data_dir, split):
        if not examples:
            raise InputError(f"{data_dir}: the {split} split has no examples")
        known = set(self.get_labels())
        for example in examples:
            unknown = [name for name in example.label if name not in known]
            if unknown and split != "test":
                labels = self.get_labels()
                raise InputError(f"{example.where}: unknown label {unknown[0]!r}; expected labels of "
                                 f"{', '.join(labels[:20])}{' ...' if len(labels) > 20 else ''}")
            if unknown:  # (test labels are not used: predictions only)
                example.label = tuple(name for name in example.label if name in known)
        return examples
