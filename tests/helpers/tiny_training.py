"""A tiny pretraining model and task for driving `training.driver.Driver` in-process."""

import numpy as np
import tensorflow as tf

import modeling
from bert_realformer.pretraining.losses import pretraining_totals, replica_pretraining_loss
from bert_realformer.training.driver import TrainingTask

TINY = modeling.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=32, max_position_embeddings=16, type_vocab_size=2)


def pretraining_data(n=64, seq=12, predictions=3, seed=0):
    """Random pretraining features {name: [n, ...] array} for the TINY vocabulary."""
    rng = np.random.RandomState(seed)
    return {"input_ids": rng.randint(1, 50, size=(n, seq)).astype("int32"),
            "input_mask": np.ones((n, seq), "int32"), "segment_ids": np.zeros((n, seq), "int32"),
            "masked_lm_positions": rng.randint(0, seq, size=(n, predictions)).astype("int32"),
            "masked_lm_ids": rng.randint(1, 50, size=(n, predictions)).astype("int32"),
            "masked_lm_weights": np.ones((n, predictions), "float32"),
            "next_sentence_labels": rng.randint(0, 2, size=(n, 1)).astype("int32")}


def pretraining_loss_fn(keep_probs=None):
    def loss_fn(model, features, step, totals):
        outputs = model(features, training=True, layer_keep_probs=keep_probs)
        return replica_pretraining_loss(outputs, features, totals)
    return loss_fn


def pretraining_task(num_train_steps, batch_size=8, learning_rate=1e-3, loss_fn=None):
    """A `TrainingTask` over `pretraining_data()`, repeated."""
    data = pretraining_data()
    return TrainingTask(
        loss_fn=loss_fn or pretraining_loss_fn(), totals_fn=pretraining_totals, batch_size=batch_size,
        dataset_fn=lambda start: tf.data.Dataset.from_tensor_slices(data).repeat()
        .skip(start * batch_size).batch(batch_size),
        learning_rate=learning_rate, num_train_steps=num_train_steps, num_warmup_steps=0)


def classification_data(n=64, seq=12, seed=0):
    """Random token features with labels {0, 1}: 1 where token 7 occurs (learnable), balanced."""
    rng = np.random.RandomState(seed)
    ids = rng.randint(8, 50, size=(n, seq)).astype("int32")
    labels = np.arange(n) % 2
    ids[labels == 1, rng.randint(1, seq)] = 7
    return {"input_ids": ids, "input_mask": np.ones((n, seq), "int32"), "segment_ids": np.zeros((n, seq), "int32"),
            "label_ids": labels.astype("int32")}


def classification_task(num_train_steps, seed=0, learning_rate=1e-3, num_warmup_steps=0, batch_size=8):
    """A `TrainingTask` of a two-class BertClassifier on `classification_data()`, in the order
    `seed` gives (`per_example.training_batches`)."""
    from bert_realformer.finetuning.schedule import example_totals, training_batches
    from bert_realformer.tasks.classification.losses import ClassifierLoss
    from bert_realformer.tasks.classification.task import classifier_loss_fn
    data = classification_data()
    return TrainingTask(
        loss_fn=classifier_loss_fn(ClassifierLoss()), totals_fn=example_totals, batch_size=batch_size,
        dataset_fn=lambda start: training_batches(tf.data.Dataset.from_tensor_slices(data), batch_size, seed, start,
                                                  len(data["label_ids"])),
        learning_rate=learning_rate, num_train_steps=num_train_steps, num_warmup_steps=num_warmup_steps)
