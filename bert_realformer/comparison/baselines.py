"""What each metric would be without a model: the floor the study's numbers stand on.

* held-out MLM accuracy of always predicting the masked token most frequent in the training
  records (the unigram stage every pretraining passes through);
* held-out NSP accuracy of always predicting the label most frequent in training;
* a classification task's dev accuracy and macro-F1 of always predicting its most frequent
  training label (macro-F1: that label's F1, 2p / (p + 1) with p its share of dev, over the
  number of labels; the others score 0).
"""

import collections

import numpy as np

from bert_realformer.comparison.plan import DownstreamTask


def _pretraining_columns(files, max_seq_length, max_predictions_per_seq, masked_lm_prob, limit=None):
    """(masked_lm_ids, masked_lm_weights, next_sentence_labels or None) numpy arrays of
    `files`; unmasked records with their evaluation masks (the replacement ids drawn for
    them do not change the labels, so any vocabulary size will do)."""
    from bert_realformer.pretraining.dynamic_masking import DynamicMasking
    from bert_realformer.pretraining.input_pipeline import one_pass_dataset
    masking = DynamicMasking(masked_lm_prob, max_predictions_per_seq, vocab_size=1)
    ids, weights, labels = [], [], []
    for count, batch in enumerate(one_pass_dataset(files, 1024, max_seq_length, max_predictions_per_seq, masking)):
        if limit is not None and count * 1024 >= limit:
            break
        ids.append(batch["masked_lm_ids"].numpy())
        weights.append(batch["masked_lm_weights"].numpy())
        if "next_sentence_labels" in batch:
            labels.append(batch["next_sentence_labels"].numpy().reshape(-1))
    return np.concatenate(ids), np.concatenate(weights), np.concatenate(labels) if labels else None


def pretraining_baselines(train_files, eval_files, max_seq_length, max_predictions_per_seq,
                          max_eval_examples=None, masked_lm_prob=0.15):
    """{"masked_lm_accuracy": unigram, "next_sentence_accuracy": majority (where the records
    have NSP labels)} on the first `max_eval_examples` held-out examples (those the
    evaluation reads)."""
    train_ids, train_weights, train_labels = _pretraining_columns(train_files, max_seq_length,
                                                                  max_predictions_per_seq, masked_lm_prob)
    counts = collections.Counter(train_ids[train_weights > 0].tolist())
    token = counts.most_common(1)[0][0]
    ids, weights, labels = _pretraining_columns(eval_files, max_seq_length, max_predictions_per_seq,
                                                masked_lm_prob, max_eval_examples)
    ids, weights = ids[:max_eval_examples], weights[:max_eval_examples]
    result = {"masked_lm_accuracy": float(np.sum((ids == token) * weights) / np.sum(weights))}
    if train_labels is not None and labels is not None:
        majority = collections.Counter(train_labels.tolist()).most_common(1)[0][0]
        result["next_sentence_accuracy"] = float(np.mean(labels[:max_eval_examples] == majority))
    return result


def classification_processor(task: DownstreamTask):
    """The processor reading a run_classifier.py task's files, as the script makes it."""
    from bert_realformer.tasks.classification.processors import get_processor
    options = {name: task.flag(name) for name in ("data_format", "text_a_column", "text_b_column",
                                                  "label_column", "label_file")}
    return get_processor(task.flag("task_name"), task.flag("data_dir"), **options)


def classifier_baselines(task: DownstreamTask):
    """{"eval_accuracy", "macro_f1"} of the majority label for a run_classifier.py task, and
    {"test_accuracy", "test_macro_f1"} likewise when it predicts its test split (None for other
    scripts)."""
    if task.script != "run_classifier.py":
        return None
    data_dir = task.flag("data_dir")
    processor = classification_processor(task)
    train = collections.Counter(e.label for e in processor.get_train_examples(data_dir))
    majority = train.most_common(1)[0][0]
    splits = {"eval": processor.get_dev_examples}
    if predicts_test(task):
        splits["test"] = processor.get_test_examples
    result = {}
    for prefix, examples in splits.items():
        labels = [e.label for e in examples(data_dir)]
        share = sum(label == majority for label in labels) / len(labels)
        accuracy, macro_f1 = ("eval_accuracy", "macro_f1") if prefix == "eval" else ("test_accuracy", "test_macro_f1")
        result.update({accuracy: share, macro_f1: 2 * share / (share + 1) / len(processor.get_labels())})
    return result


def predicts_test(task: DownstreamTask) -> bool:
    """Whether the task's flags ask for its test split's predictions (`--do_predict`)."""
    return task.flag("do_predict") in ("true", "True", "1") or "--do_predict" in task.flags
