"""Multiple choice (SWAG, or your own JSON lines): `reading` (the data files), `features` (a
sequence per choice), `task` (the loss, the training task, prediction: imported on its own, it
brings the training driver), `metrics`."""

from bert_realformer.tasks.multiple_choice.features import choice_arrays
from bert_realformer.tasks.multiple_choice.metrics import evaluation_results, test_rows
from bert_realformer.tasks.multiple_choice.reading import (
    ChoiceExample,
    data_path,
    read_examples,
    read_generic,
    read_swag,
)

__all__ = ["ChoiceExample", "choice_arrays", "data_path", "evaluation_results", "read_examples", "read_generic",
           "read_swag", "test_rows"]
