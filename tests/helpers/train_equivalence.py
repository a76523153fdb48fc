"""Runs TrainLoop under several set-ups from the same weights and data; prints JSON results.

Used by tests/test_trainer.py in a subprocess, because the two logical CPU devices that
MirroredStrategy needs must be configured before TensorFlow starts.

Without dropout, accumulated micro-batches compute the same function as the whole batch. With
dropout, a global batch cut into the same micro-batch shapes draws the same per-example masks
whether the pieces go to replicas or to accumulated micro-batches, so mirrored(2 x 4) equals one
device accumulating 2 x 4, and mirrored and accumulated (2 x 2 x 2) equals one device
accumulating 4 x 2 (the replicas compared where their masks must match too). The same holds for a
classifier trained with FGM, R-Drop and moving averages of its weights, each example perturbed
and dropped out the same way wherever it runs.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import keras  # noqa: E402

import modeling  # noqa: E402
from bert_realformer.finetuning.adversarial import Adversary  # noqa: E402
from bert_realformer.finetuning.averaging import WeightAverages  # noqa: E402
from bert_realformer.pretraining.losses import pretraining_totals, replica_pretraining_loss  # noqa: E402
from bert_realformer.tasks.classification.losses import ClassifierLoss  # noqa: E402
from bert_realformer.tasks.classification.task import classifier_loss_fn  # noqa: E402
from bert_realformer.training.driver import Driver, RunOptions  # noqa: E402
from bert_realformer.training.optimization import create_optimizer  # noqa: E402
from bert_realformer.training.trainer import TrainLoop, distributed_input, replica_stream  # noqa: E402

CONFIG = modeling.BertConfig(vocab_size=60, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                             intermediate_size=32, max_position_embeddings=16, type_vocab_size=2,
                             hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                             residual_attention="sum")
DROPOUT = CONFIG.replace(hidden_dropout_prob=0.2, attention_probs_dropout_prob=0.2)


def batches(n, batch, seed=0):
    rng = np.random.RandomState(seed)
    out = []
    for _ in range(n):
        mask = (np.arange(12)[None, :] < rng.randint(6, 13, size=(batch, 1))).astype("int32")
        out.append({"input_ids": (rng.randint(1, 60, size=(batch, 12)) * mask).astype("int32"),
                    "input_mask": mask,
                    "segment_ids": (np.arange(12)[None, :] >= 6).astype("int32").repeat(batch, 0) * mask,
                    "masked_lm_positions": rng.randint(0, 6, size=(batch, 3)).astype("int32"),
                    "masked_lm_ids": rng.randint(1, 60, size=(batch, 3)).astype("int32"),
                    "masked_lm_weights": (rng.rand(batch, 3) < 0.7).astype("float32"),
                    "next_sentence_labels": rng.randint(0, 2, size=(batch, 1)).astype("int32"),
                    "label_ids": rng.randint(0, 3, size=batch).astype("int32")})
    return out


def loss_fn(model, features, step, totals):
    return replica_pretraining_loss(model(features, training=True), features, totals)


def run(strategy, micro_batch, accumulation, global_batches, initial, config=CONFIG, classifier=False):
    """`classifier`: a 3-class classifier trained with FGM and R-Drop (alpha 1), its weights
    averaged (decay 0.5); the averages (of each replica) come after the steps."""
    keras.utils.set_random_seed(2)  # the dropout layers' initial seeds, as a run's --seed sets them
    with strategy.scope():
        model = modeling.BertClassifier(config, 3) if classifier else modeling.BertPretrainer(config)
        model.build()
        model.set_weights(initial)
        optimizer = create_optimizer(1e-2, 100, 0)
        averages = WeightAverages(model, 0.5) if classifier else None
        if classifier:
            loss, totals = Adversary("fgm", 1.0).wrap(classifier_loss_fn(ClassifierLoss(rdrop_alpha=1.0))), \
                ClassifierLoss().totals
        else:
            loss, totals = loss_fn, pretraining_totals
        loop = TrainLoop(strategy, model, optimizer, loss, totals, accumulation_steps=accumulation,
                         after_update=[averages.update] if averages is not None else ())
    # Each global batch of 8 is cut into `accumulation` micro-batches of `micro_batch`.
    pieces = [{k: v[i * micro_batch:(i + 1) * micro_batch] for k, v in b.items()}
              for b in global_batches for i in range(accumulation)]
    dataset = tf.data.Dataset.from_tensor_slices({k: np.stack([p[k] for p in pieces]) for k in pieces[0]})
    micro = dataset.unbatch().batch(micro_batch)
    iterator = iter(distributed_input(strategy, lambda: micro, micro_batch, accumulation))
    losses = [float(loop.train_step(iterator)["loss"]) for _ in global_batches]
    result = losses, [w.numpy().tolist() for w in model.trainable_weights], int(optimizer.iterations.numpy())
    if averages is None:
        return result
    weights = modeling.tf1_variable_map(model)
    return (*result, [[a.numpy().tolist() for a in strategy.experimental_local_results(average)]
                      for average in averages.averages.values()],
            [weights[name].numpy().tolist() for name in averages.averages])


def replica_masks(strategy):
    """Dropout of ones on each replica in the loop's stream for micro-batch 0 of step 7, twice."""
    with strategy.scope():
        layer = modeling.Dropout(0.5)

    @tf.function
    def draw():
        def replica():
            with modeling.random_stream(7, replica_stream(0)):
                return layer(tf.ones((4, 16)), training=True)
        return strategy.run(replica)

    return [[t.numpy().tolist() for t in strategy.experimental_local_results(draw())] for _ in range(2)]


def predictions(strategy, initial):
    """Driver.predict on 5 examples in batches of 2 (the last one partial)."""
    driver = Driver(strategy, lambda: modeling.BertPretrainer(CONFIG),
                    RunOptions(seed_globally=True,
                               output_dir=os.environ.get("TMPDIR", "/tmp")), stream=open(os.devnull, "w"))
    driver.model.set_weights(initial)
    data = {k: v[:5] for k, v in batches(1, 8, seed=3)[0].items()}
    out = driver.predict(tf.data.Dataset.from_tensor_slices(data).batch(2),
                         lambda model, f: {"nsp": model(f, training=False)["next_sentence_log_probs"]})
    return out["nsp"].tolist()


def main():
    keras.utils.set_random_seed(1)
    reference = modeling.BertPretrainer(CONFIG)
    reference.build()
    initial = reference.get_weights()
    classifier = modeling.BertClassifier(DROPOUT, 3)
    classifier.build()
    classifier_initial = classifier.get_weights()
    data = batches(3, 8)
    one = tf.distribute.OneDeviceStrategy("/cpu:0")
    mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    results = {
        "one_device": run(one, 8, 1, data, initial),
        "one_device_accumulated": run(one, 4, 2, data, initial),
        "replicas": mirrored.num_replicas_in_sync,
        "dropout": {
            "one_device_2x4": run(one, 4, 2, data, initial, DROPOUT),
            "mirrored": run(mirrored, 8, 1, data, initial, DROPOUT),
            "one_device_4x2": run(one, 2, 4, data, initial, DROPOUT),
            "mirrored_accumulated": run(mirrored, 4, 2, data, initial, DROPOUT),
        },
        "regularized": {
            "one_device_2x4": run(one, 4, 2, data, classifier_initial, DROPOUT, classifier=True),
            "mirrored": run(mirrored, 8, 1, data, classifier_initial, DROPOUT, classifier=True),
        },
        "replica_masks": replica_masks(mirrored),
        "predict_one_device": predictions(one, initial),
        "predict_mirrored": predictions(mirrored, initial),
    }
    print("RESULT " + json.dumps(results))


if __name__ == "__main__":
    main()
