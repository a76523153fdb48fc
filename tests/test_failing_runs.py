"""The training loop's parts when a run goes wrong, in this process: the step loop stops at the
first non-finite step, loss scaling skips an overflow, a damaged record is found and named, a
damaged fine-tuning cache, an output directory under a file, a config that does not match the
run directory; and what a run leaves for the user: the recorded config, progress from the first
step, eval curves in TensorBoard. How the scripts end on the same faults (a diverging run, a
damaged input met in training: one line, a status, the training state kept) is
test_run_endings.py."""

import glob
import io
import json
import os

import numpy as np
import pytest
import tensorflow as tf
from helpers.tiny_training import TINY, pretraining_data, pretraining_loss_fn, pretraining_task

import modeling
from bert_realformer import storage, tfrecords
from bert_realformer.checkpoints.config_files import read_config
from bert_realformer.commandline.runner import as_flags
from bert_realformer.errors import InputError
from bert_realformer.pretraining.losses import pretraining_totals
from bert_realformer.training import recorded_config, trainer
from bert_realformer.training.driver import Driver, RunOptions
from bert_realformer.training.evaluation import write_eval_results
from bert_realformer.training.optimization import create_optimizer
from bert_realformer.training.progress import LoopSizes

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
RECORDS = os.path.join(DATA, "pretraining_data", "plain.tfrecord")


def _driver(out, stream=None, config=TINY, **options):
    return Driver(tf.distribute.OneDeviceStrategy("/cpu:0"), lambda: modeling.BertPretrainer(config),
                  RunOptions(seed_globally=True, output_dir=str(out), **options), stream=stream or io.StringIO())


def _nan_from_step(step_number):
    """The tiny pretraining loss, and so its gradients, not a number from optimizer step
    `step_number` (0-based) on."""
    loss_fn = pretraining_loss_fn()

    def poisoned(model, features, step, totals):
        loss, metrics = loss_fn(model, features, step, totals)
        factor = tf.where(step >= step_number, np.nan, 1.0)
        return loss * factor, {name: value * factor for name, value in metrics.items()}
    return poisoned


# ---------------------------------------------------------------------- divergence
def test_the_loop_stops_at_the_first_non_finite_step_and_changes_nothing():
    """Three good steps, then NaN: a loop of 10 ends after the fourth attempt, which changed no
    weight, slot or step counter."""
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        model = modeling.BertPretrainer(TINY)
        model.build()
        optimizer = create_optimizer(1e-3, 100, 0)
        loop = trainer.TrainLoop(strategy, model, optimizer, _nan_from_step(3), pretraining_totals)
    iterator = iter(strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensor_slices(pretraining_data()).repeat().batch(8)))
    metrics = loop.run_steps(iterator, 3)
    assert not bool(metrics["diverged"]) and int(optimizer.iterations.numpy()) == 3
    before = [v.numpy().copy() for v in model.trainable_weights + optimizer.variables]
    metrics = loop.run_steps(iterator, 10)
    assert bool(metrics["diverged"]) and np.isnan(float(metrics["loss"]))
    assert int(optimizer.iterations.numpy()) == 3 and int(loop.input_position.numpy()) == 4
    for a, v in zip(before, model.trainable_weights + optimizer.variables):
        np.testing.assert_array_equal(a, v.numpy(), err_msg=v.path)


def test_under_loss_scaling_an_overflow_is_a_skip_until_the_scale_is_at_its_floor(float32_policy):
    import keras
    keras.config.set_dtype_policy("mixed_float16")
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        model = modeling.BertPretrainer(TINY)
        model.build()
        optimizer = create_optimizer(1e-3, 100, 0)
        loop = trainer.TrainLoop(strategy, model, optimizer, pretraining_loss_fn(), pretraining_totals,
                                 loss_scaling=True)
    iterator = iter(strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensor_slices(pretraining_data()).repeat().batch(8)))
    loop.loss_scale.assign(2.0 ** 100)  # overflows: skipped steps, the scale halves
    metrics = loop.run_steps(iterator, 3)
    assert not bool(metrics["diverged"]) and float(loop.loss_scale.numpy()) == 2.0 ** 97
    poisoned = trainer.TrainLoop(strategy, model, optimizer, _nan_from_step(0), pretraining_totals,
                                 loss_scaling=True)
    poisoned.loss_scale.assign(4.0)
    metrics = poisoned.run_steps(iterator, 10)  # 4 -> 2 -> 1 skipping, then at 1: diverged
    assert bool(metrics["diverged"]) and int(poisoned.input_position.numpy()) == 3


# ---------------------------------------------------------------------- damaged records
def _damaged_copies(tmp_path):
    data = open(RECORDS, "rb").read()
    truncated, flipped = tmp_path / "truncated.tfrecord", tmp_path / "flipped.tfrecord"
    truncated.write_bytes(data[:len(data) // 2])
    damaged = bytearray(data)
    damaged[5000] ^= 0x40
    flipped.write_bytes(bytes(damaged))
    return str(truncated), str(flipped)


def test_find_damage_names_the_record_and_agrees_with_tensorflow(tmp_path):
    truncated, flipped = _damaged_copies(tmp_path)
    assert tfrecords.find_damage(RECORDS) is None
    found = {path: tfrecords.find_damage(path) for path in (truncated, flipped)}
    for path, damage in found.items():
        # TensorFlow's reader fails at the same record (its offset is of the data, 12 bytes on).
        with pytest.raises(tf.errors.DataLossError) as info:
            for _ in tf.data.TFRecordDataset(path):
                pass
        offset = int(damage.split(" at offset ")[1].split()[0])
        assert f"record at {offset}" in info.value.message or f"record at {offset + 12}" in info.value.message
    assert found[truncated].startswith("truncated record at offset ")
    assert found[flipped].startswith("corrupted record at offset ") and "data's CRC" in found[flipped]
    with pytest.raises(InputError, match=f"^input_file: {flipped}: corrupted record at offset"):
        tfrecords.check_files([RECORDS, flipped], "input_file")
    empty = tmp_path / "empty.tfrecord"
    empty.write_bytes(b"")
    assert tfrecords.find_damage(str(empty)) is None


def test_a_fine_tuning_cache_damaged_under_training_names_the_cache(tmp_path):
    """A feature cache damaged after it was checked (say, by another process): the record met in
    training names the cache and what to do, not a flag the script does not have."""
    import tokenization
    from bert_realformer.finetuning.schedule import Schedule
    from bert_realformer.tasks.classification import task as classifier_task
    from bert_realformer.tasks.classification.reading import InputExample
    words = "the quick brown fox jumps over a lazy dog and runs away".split()
    examples = [InputExample(f"train-{i}", " ".join(words[i % 5:i % 5 + 6]), label=str(i % 2)) for i in range(96)]
    tokenizer = tokenization.FullTokenizer(os.path.join(DATA, "tokenization", "vocab_en_uncased.txt"))
    cache = tmp_path / "out" / "train.tf_record"
    os.makedirs(cache.parent)
    task = classifier_task.training_task(examples, tokenizer, 16, Schedule(batch_size=8, learning_rate=1e-3,
                                                                           num_train_epochs=3),
                                         label_list=["0", "1"], features_path=str(cache))
    damaged = bytearray(cache.read_bytes())
    damaged[len(damaged) // 2] ^= 0x40
    cache.write_bytes(bytes(damaged))
    config = TINY.replace(vocab_size=len(tokenizer.vocab))
    driver = Driver(tf.distribute.OneDeviceStrategy("/cpu:0"), lambda: modeling.BertClassifier(config, 2),
                    RunOptions(seed_globally=True,
                               output_dir=str(cache.parent), iterations_per_loop=5, save_checkpoints_steps=5),
                    stream=io.StringIO())
    with pytest.raises(InputError) as info:
        driver.train(task)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"the training feature cache: {cache}: corrupted record at offset ")
    assert "run again: a damaged cache is written anew" in message and "--input_file" not in message


# ---------------------------------------------------------------------- unwritable output directories
def test_an_output_dir_under_a_file_or_a_file_is_one_line(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    with pytest.raises(InputError, match=f"^output_dir={blocker}/out cannot be written: Not a directory$"):
        storage.check_writable_dir(f"{blocker}/out", "output_dir")
    with pytest.raises(InputError, match=f"^output_dir={blocker} is a file, not a directory$"):
        storage.check_writable_dir(str(blocker), "output_dir")
    storage.check_writable_dir(str(tmp_path / "new" / "out"), "output_dir")  # created, left empty
    assert os.listdir(tmp_path / "new" / "out") == []
    storage.check_writable_dir("ram://writable/out", "output_dir")


# ---------------------------------------------------------------------- the recorded config
def test_a_training_run_records_its_config_and_later_runs_are_checked_against_it(tmp_path):
    out = tmp_path / "out"
    realformer = TINY.replace(residual_attention="sum")
    _driver(out, config=realformer, iterations_per_loop=5).train(pretraining_task(num_train_steps=2))
    recorded = json.loads((out / "bert_config.json").read_text())
    assert recorded == realformer.to_dict() and recorded["residual_attention"] == "sum"

    stream = io.StringIO()  # the same weights as post-LN: a warning, and it runs
    _driver(out, stream=stream, config=TINY).restore_for_inference()
    assert (f"warning: {out} was trained as RealFormer ({out / 'bert_config.json'}); this run uses "
            "post-LN with the same weights") in stream.getvalue()
    with pytest.raises(InputError) as info:  # another size: stops before loading anything
        _driver(out, config=TINY.replace(intermediate_size=48)).restore_for_inference()
    assert as_flags(info.value) == (f"--bert_config_file does not match the model trained in {out}: intermediate_size "
                               f"48 (recorded: 32); use its {out / 'bert_config.json'}")


def test_starting_from_another_variant_says_so_in_one_short_line(tmp_path):
    """The continued-pretraining journey: a released post-LN checkpoint (its bert_config.json
    beside it) into a pre-LN model."""
    config = read_config(os.path.join(DATA, "bert_postln_tiny", "bert_config.json"))
    stream = io.StringIO()
    driver = _driver(tmp_path / "out", stream=stream, config=config.replace(layer_norm_type="pre"),
                     init_checkpoint=os.path.join(DATA, "bert_postln_tiny", "bert_model.ckpt"))
    driver.train(pretraining_task(num_train_steps=0))
    lines = stream.getvalue().splitlines()
    assert "variant: post-LN checkpoint -> pre-LN (LayerNorms the checkpoint lacks start fresh)" in lines
    (weights,) = [line for line in lines if line.startswith("weights:")]
    assert len(weights) < 450, weights  # (1379 characters when every name was listed)
    assert ("freshly initialised (not in it): 14 weights: bert/encoder/layer_*/attention/LayerNorm/{beta,gamma}, "
            "bert/encoder/layer_*/intermediate/LayerNorm/{beta,gamma}, bert/encoder/LayerNorm/{beta,gamma}; "
            "in it but unused: 12 weights: ") in weights


# ---------------------------------------------------------------------- progress and TensorBoard
def test_loop_sizes_start_at_one_step_and_follow_the_measured_rate():
    sizes = LoopSizes(limit=1000)
    assert sizes.next() == 1
    sizes.record(1, 20.0)  # tracing: 20 s for one step
    assert sizes.next() == 1
    sizes.record(1, 0.5)  # 2 steps/s: about 10 s
    assert sizes.next() == 20
    sizes.record(20, 0.002)  # fast steps: at most --iterations_per_loop
    assert sizes.next() == 1000
    sizes.record(1000, 1000.0)  # a long run: loops of about a minute
    assert sizes.next() == 60


def test_progress_comes_after_the_first_step_even_with_long_loops(tmp_path):
    stream = io.StringIO()
    _driver(tmp_path / "out", stream=stream, iterations_per_loop=1000).train(pretraining_task(num_train_steps=30))
    lines = [line for line in stream.getvalue().splitlines() if line.startswith("step ")]
    assert lines[0].startswith("step 1/30: loss ") and "steps/s" not in lines[0]
    assert len(lines) >= 3 and lines[-1].startswith("step 30/30") and "steps/s" in lines[1]


def test_eval_results_go_to_tensorboard_too(tmp_path):
    result = {"eval_accuracy": 0.75, "eval_loss": 0.5, "global_step": 12, "confusion_matrix": "[[1]]"}
    write_eval_results(result, str(tmp_path / "eval_results.txt"))
    assert (tmp_path / "eval_results.txt").read_text().startswith("confusion_matrix = [[1]]\n")
    scalars = {}
    for path in glob.glob(str(tmp_path / "eval" / "events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(path):
            for value in event.summary.value:
                scalars[value.tag] = (event.step, float(tf.make_ndarray(value.tensor)))
    assert scalars == {"eval_accuracy": (12, 0.75), "eval_loss": (12, 0.5)}


def test_recorded_config_reads_what_it_wrote_and_keeps_a_file_that_says_the_same(tmp_path):
    config = TINY.replace(layer_norm_type="pre", residual_attention="mean")
    recorded_config.record(config, str(tmp_path))
    assert recorded_config.read(str(tmp_path)).to_dict() == config.to_dict()
    users_own = json.dumps(config.to_dict())  # on one line: the same config, not our formatting
    (tmp_path / "bert_config.json").write_text(users_own)
    recorded_config.record(config, str(tmp_path))
    assert (tmp_path / "bert_config.json").read_text() == users_own
    assert config.variant.name == "pre-LN RealFormer-mean"
    assert recorded_config.check_against_recorded(config, str(tmp_path)) is None
