"""Trains an MLM-only model on unmasked records (masked as read) under several set-ups from the
same initial weights; prints JSON {set-up: weights}. Used by tests/test_mlm_only_pretraining.py
in a subprocess: MirroredStrategy's two logical CPU devices must be configured before
TensorFlow starts.

    python dynamic_masking_replicas.py RECORDS WORK_DIR

Set-ups, 3 optimizer steps of 8 examples each: one device (batch 8), one device accumulating
2 micro-batches of 4, 2 replicas of 4; with dropout, the last two again.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import tensorflow as tf  # noqa: E402

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import modeling  # noqa: E402
from bert_realformer.pretraining.dynamic_masking import DynamicMasking  # noqa: E402
from bert_realformer.pretraining.input_pipeline import check_records  # noqa: E402
from bert_realformer.pretraining.task import pretraining_task  # noqa: E402
from bert_realformer.training.driver import Driver, RunOptions  # noqa: E402

CONFIG = modeling.BertConfig(vocab_size=30522, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                             intermediate_size=32, max_position_embeddings=64, type_vocab_size=2,
                             hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, residual_attention="sum")
DROPOUT = CONFIG.replace(hidden_dropout_prob=0.2, attention_probs_dropout_prob=0.2)


def train(records, directory, strategy, batch_size, accumulation, config):
    layout = check_records([records], 64, 20, config.vocab_size, next_sentence=False)
    masking = DynamicMasking(0.15, 20, config.vocab_size, seed=3)
    options = RunOptions(seed_globally=True, output_dir=directory, seed=3, gradient_accumulation_steps=accumulation,
                         save_checkpoints_steps=100, iterations_per_loop=1)
    driver = Driver(strategy, lambda: modeling.BertPretrainer(config, next_sentence=False), options,
                    stream=open(os.devnull, "w"))
    task = pretraining_task([records], batch_size, 64, 20, 1e-2, 3, 0, seed=3, next_sentence=False,
                            layout=layout, masking=masking)
    driver.train(task)
    return [w.numpy().tolist() for w in driver.model.trainable_weights]


def main(records, work):
    one = tf.distribute.OneDeviceStrategy("/cpu:0")
    mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    runs = {"one_device": train(records, f"{work}/one", one, 8, 1, CONFIG),
            "accumulated": train(records, f"{work}/acc", one, 4, 2, CONFIG),
            "mirrored": train(records, f"{work}/mir", mirrored, 8, 1, CONFIG),
            "accumulated_dropout": train(records, f"{work}/acc_d", one, 4, 2, DROPOUT),
            "mirrored_dropout": train(records, f"{work}/mir_d", mirrored, 8, 1, DROPOUT)}
    print("RESULT " + json.dumps(runs))


if __name__ == "__main__":
    main(*sys.argv[1:3])
