"""SQuAD v1.1 / v2.0 and Chinese MRC (CMRC 2018, DRCD) as the original run_squad.py: examples
(`reading`), windowed features (`features`), answers from the span logits (`answers`), the
task for the training driver and prediction (`task`: imported on its own, it brings the training
driver), and the official metrics (`metrics`,
`cmrc2018_metrics`)."""

from bert_realformer.tasks.squad.answers import RawResult, compute_predictions, get_final_text
from bert_realformer.tasks.squad.features import InputFeatures, convert_examples_to_features, iter_features
from bert_realformer.tasks.squad.reading import SquadExample, join_words, read_squad_examples, split_context

__all__ = ["InputFeatures", "RawResult", "SquadExample", "compute_predictions", "convert_examples_to_features",
           "get_final_text", "iter_features", "join_words", "read_squad_examples", "split_context"]
