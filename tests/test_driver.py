"""The training driver in-process: the weights policy, skipped fp16 steps, variables without
gradients, the SQuAD training set-up, progress output."""

import io
import os
import random

import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers.tiny_training import TINY
from helpers.tiny_training import pretraining_data as _pretraining_data
from helpers.tiny_training import pretraining_loss_fn as _loss_fn
from helpers.tiny_training import pretraining_task as _task

import modeling
from bert_realformer import checkpoints
from bert_realformer.checkpoints import training_states
from bert_realformer.checkpoints.config_files import read_config
from bert_realformer.errors import InputError
from bert_realformer.finetuning.schedule import Schedule
from bert_realformer.pretraining.losses import pretraining_totals
from bert_realformer.tasks.feature_cache import record_count
from bert_realformer.tasks.squad import task as squad_task
from bert_realformer.tasks.squad.reading import SquadExample
from bert_realformer.training import trainer
from bert_realformer.training.driver import Driver, RunOptions
from bert_realformer.training.optimization import create_optimizer
from bert_realformer.training.progress import Progress
from tokenization import FullTokenizer

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
def _write_empty_checkpoint(prefix):
    checkpoints.write_tf1_checkpoint({"x": np.zeros(1, "float32")}, prefix)


# ---------------------------------------------------------------------- the weights policy
def test_weights_policy_prefers_the_output_dir_then_init_checkpoint(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    init = str(tmp_path / "init" / "bert_model.ckpt")
    _write_empty_checkpoint(init)
    with pytest.raises(InputError, match="no weights to evaluate or predict with"):
        training_states.choose_weights(str(out), None, training=False)
    assert training_states.choose_weights(str(out), None, training=True) is None
    assert training_states.choose_weights(str(out), init, training=False) == training_states.Checkpoint(
        init, training_states.TF1_KIND, 0)

    _write_empty_checkpoint(str(out / "model.ckpt-7"))
    chosen = training_states.choose_weights(str(out), init, training=False)
    assert (chosen.prefix, chosen.kind, chosen.step) == (str(out / "model.ckpt-7"), training_states.TF1_KIND, 7)
    training_states.write_training_state({"x": np.zeros(1, "float32")}, str(out))  # ckpt-0
    assert training_states.choose_weights(str(out), init, training=True).step == 7  # the later one
    # A run directory given as --init_checkpoint resolves to its latest checkpoint.
    assert training_states.resolve(str(out)).prefix == str(out / "model.ckpt-7")


def test_eval_on_a_checkpoint_without_the_head_is_refused(tmp_path):
    """Inference never runs on freshly initialised weights."""
    driver = Driver(tf.distribute.OneDeviceStrategy("/cpu:0"),
                    lambda: modeling.BertClassifier(read_config(
                        os.path.join(DATA, "bert_postln_tiny", "bert_config.json")), 2),
                    RunOptions(seed_globally=True, output_dir=str(tmp_path / "out"),
                               init_checkpoint=os.path.join(DATA, "bert_postln_tiny", "bert_model.ckpt")),
                    stream=io.StringIO())
    with pytest.raises(checkpoints.CheckpointError, match="lacks weights the model needs: output_weights"):
        driver.restore_for_inference()


def test_a_driver_changes_no_process_state_unless_asked(tmp_path):
    """The run's dtype policy holds for its model only; the process is seeded only when the
    options ask (as the scripts do), and then `seed` decides the initial weights."""
    config = TINY.replace(residual_attention="sum")

    def build(**options):
        return Driver(tf.distribute.OneDeviceStrategy("/cpu:0"), lambda: modeling.BertClassifier(config, 2),
                      RunOptions(output_dir=str(tmp_path / "out"), mixed_precision="bf16", **options),
                      stream=io.StringIO())

    def initial_weights(process_seed, seed, **options):
        keras.utils.set_random_seed(process_seed)  # (the state a script or a notebook left)
        driver = build(seed=seed, **options)
        return driver.model.get_layer("bert").get_weights()[0]

    # Not asked: the process's own random state decides, the run's seed does not reseed it.
    np.testing.assert_array_equal(initial_weights(1, seed=7), initial_weights(1, seed=8))
    assert not np.array_equal(initial_weights(1, seed=7), initial_weights(2, seed=7))
    assert keras.config.dtype_policy().name == "float32"
    assert build().model.get_layer("bert").compute_dtype == "bfloat16"
    assert keras.layers.Dense(2).compute_dtype == "float32"  # a layer made after the driver
    # Asked: `seed` decides.
    np.testing.assert_array_equal(initial_weights(1, seed=7, seed_globally=True),
                                  initial_weights(2, seed=7, seed_globally=True))
    assert not np.array_equal(initial_weights(1, seed=7, seed_globally=True),
                              initial_weights(1, seed=8, seed_globally=True))


# ---------------------------------------------------------------------- skipped fp16 steps
def _fp16_loop():
    keras.config.set_dtype_policy("mixed_float16")
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    keras.utils.set_random_seed(0)
    with strategy.scope():
        model = modeling.BertPretrainer(TINY.replace(residual_attention="sum"))
        model.build()
        optimizer = create_optimizer(1e-3, 100, 10)
        loop = trainer.TrainLoop(strategy, model, optimizer, _loss_fn(), pretraining_totals,
                                 loss_scaling=True)
    dataset = tf.data.Dataset.from_tensor_slices(_pretraining_data()).repeat().batch(8)
    return loop, iter(strategy.experimental_distribute_dataset(dataset)), model, optimizer


def test_an_overflowing_fp16_step_changes_nothing_not_even_the_step(float32_policy):
    loop, iterator, model, optimizer = _fp16_loop()
    loop.train_step(iterator)  # one real step: the slots are no longer zero
    before = [v.numpy().copy() for v in model.trainable_weights + optimizer.variables]
    learning_rate = float(optimizer.learning_rate)
    loop.loss_scale.assign(2.0 ** 100)  # guarantees inf gradients
    loop.train_step(iterator)
    assert float(loop.loss_scale.numpy()) == 2.0 ** 99
    assert int(optimizer.iterations.numpy()) == 1 and int(loop.input_position.numpy()) == 2
    assert float(optimizer.learning_rate) == learning_rate
    for a, v in zip(before, model.trainable_weights + optimizer.variables):
        np.testing.assert_array_equal(a, v.numpy(), err_msg=v.path)


def test_the_run_makes_its_number_of_real_steps_despite_skipped_ones(tmp_path, float32_policy, monkeypatch):
    """Starting from a loss scale that overflows, the first attempts are skipped; the run still
    ends at --num_train_steps real updates, having read one micro-batch per attempt."""
    monkeypatch.setattr(trainer, "INITIAL_LOSS_SCALE", 2.0 ** 40)
    out = tmp_path / "out"
    stream = io.StringIO()
    driver = Driver(tf.distribute.OneDeviceStrategy("/cpu:0"), lambda: modeling.BertPretrainer(TINY),
                    RunOptions(seed_globally=True, output_dir=str(out), mixed_precision="fp16", iterations_per_loop=50,
                               save_checkpoints_steps=50), stream=stream)
    assert driver.train(_task(num_train_steps=4)) == 4
    reader = tf.train.load_checkpoint(str(out / "training_state" / "ckpt-4"))
    position = int(reader.get_tensor("input_position/.ATTRIBUTES/VARIABLE_VALUE"))
    scale = float(reader.get_tensor("loss_scale/.ATTRIBUTES/VARIABLE_VALUE"))
    assert position > 4 and scale < 2.0 ** 40
    assert position - 4 == round(np.log2(2.0 ** 40 / scale))  # one halving per skipped attempt
    assert "step 4/4" in stream.getvalue()


def _truncate(path):
    """Cut short in its first tensor (the CRC of each tensor is checked on reading, so a tensor
    that lies wholly before the cut still reads)."""
    path.write_bytes(path.read_bytes()[:64])


@pytest.mark.parametrize("damage", [
    lambda state: next(state.glob("ckpt-2.data-*")).unlink(),
    lambda state: _truncate(next(state.glob("ckpt-2.data-*"))),
    lambda state: _truncate(state / "ckpt-2.index"),
], ids=["data-missing", "data-truncated", "index-truncated"])
def test_a_damaged_training_state_is_one_line_naming_it(tmp_path, float32_policy, damage):
    """The only training state cannot be read (a partial copy, a full disk): resuming, and eval
    alone, stop with one line naming it (resuming: and the directory, with nothing earlier to
    resume from), and move or write nothing."""
    out = tmp_path / "out"
    options = RunOptions(seed_globally=True, output_dir=str(out), iterations_per_loop=2, save_checkpoints_steps=2)

    def driver():
        return Driver(tf.distribute.OneDeviceStrategy("/cpu:0"), lambda: modeling.BertPretrainer(TINY),
                      options, stream=io.StringIO())

    assert driver().train(_task(num_train_steps=2)) == 2
    state = out / "training_state"
    damage(state)
    before = sorted(os.listdir(state))
    with pytest.raises(checkpoints.CheckpointError) as resumed:
        driver().train(_task(num_train_steps=4))
    with pytest.raises(checkpoints.CheckpointError) as evaluated:
        driver().restore_for_inference()
    assert str(evaluated.value).startswith(f"{state / 'ckpt-2'}: cannot read checkpoint (")
    assert str(resumed.value).startswith(f"{state / 'ckpt-2'}: ")  # and no earlier state to fall back on:
    assert f"{state} holds no" in str(resumed.value) and "move the directory away to start over" in str(resumed.value)
    assert "\n" not in str(resumed.value) + str(evaluated.value)
    assert sorted(os.listdir(state)) == before


# ---------------------------------------------------------------------- no gradient, no update
def test_variables_without_gradient_keep_their_value_and_slots(float32_policy):
    """The span labeler never uses the pooler, and a layer that Progressive Layer Dropping
    skips gets zero gradients: neither moves (no momentum, no weight decay), as the original
    skips variables without a gradient; the layers that ran do move."""
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    keras.utils.set_random_seed(0)
    data = _pretraining_data()
    with strategy.scope():
        model = modeling.BertPretrainer(TINY)
        model.build()
        optimizer = create_optimizer(1e-2, 100, 0)
        skip_layer_1 = np.array([1.0, 1e-9], "float32")
        loop = trainer.TrainLoop(strategy, model, optimizer, _loss_fn(skip_layer_1), pretraining_totals)
    names = modeling.tf1_variable_map(model)
    pooler = names["bert/pooler/dense/kernel"]  # NSP uses it; it must move
    skipped, kept = names["bert/encoder/layer_1/output/dense/kernel"], names["bert/encoder/layer_0/output/dense/kernel"]
    before = {name: v.numpy().copy() for name, v in names.items()}
    iterator = iter(strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensor_slices(data).repeat().batch(8)))
    loop.run_steps(iterator, 3)
    np.testing.assert_array_equal(skipped.numpy(), before["bert/encoder/layer_1/output/dense/kernel"])
    assert not np.array_equal(kept.numpy(), before["bert/encoder/layer_0/output/dense/kernel"])
    assert not np.array_equal(pooler.numpy(), before["bert/pooler/dense/kernel"])
    slots = {v.path: v.numpy() for v in optimizer.variables}
    skipped_slots = [value for path, value in slots.items() if "_layer_1_" in path]
    kept_slots = [value for path, value in slots.items() if "_layer_0_" in path]
    assert len(skipped_slots) == len(kept_slots) == 32  # 16 weights x (m, v)
    assert not any(np.any(value) for value in skipped_slots) and all(np.any(v) for v in kept_slots)

    # SQuAD: the pooler gets no gradient at all.
    keras.utils.set_random_seed(0)
    with strategy.scope():
        span = modeling.BertSpanLabeler(TINY)
        span.build()
        span_optimizer = create_optimizer(1e-2, 100, 0)
        span_loop = trainer.TrainLoop(strategy, span, span_optimizer, squad_task.span_loss_fn,
                                      lambda f: {"examples": tf.cast(tf.shape(f["input_ids"])[0], tf.float32)})
    pooler = modeling.tf1_variable_map(span)["bert/pooler/dense/kernel"]
    start = pooler.numpy().copy()
    features = {k: data[k] for k in ("input_ids", "input_mask", "segment_ids")}
    features["start_positions"] = data["masked_lm_positions"][:, 0]
    features["end_positions"] = data["masked_lm_positions"][:, 1]
    span_loop.run_steps(iter(strategy.experimental_distribute_dataset(
        tf.data.Dataset.from_tensor_slices(features).repeat().batch(8))), 2)
    np.testing.assert_array_equal(pooler.numpy(), start)
    assert int(span_optimizer.iterations.numpy()) == 2


# ---------------------------------------------------------------------- SQuAD set-up
def _squad_examples(tokenizer, n=10):
    words = [w for w in tokenizer.vocab if w.isalpha()][:30]
    return [SquadExample(qas_id=f"q{i}", question_text=" ".join(words[i:i + 2]), doc_tokens=words * 2,
                         orig_answer_text=words[3], start_position=3, end_position=3) for i in range(n)]


def test_squad_steps_count_examples_and_examples_are_shuffled_as_the_original(tmp_path):
    tokenizer = FullTokenizer(os.path.join(DATA, "bert_postln_tiny", "vocab.txt"), do_lower_case=True)
    examples = _squad_examples(tokenizer)
    task = squad_task.training_task(
        examples, tokenizer, 32, Schedule(batch_size=4, learning_rate=1e-4, num_train_epochs=2, warmup_proportion=0.1),
        doc_stride=16, max_query_length=8, features_path=str(tmp_path / "train.tf_record"))
    num_features, reused = record_count(str(tmp_path / "train.tf_record")), task.summary.startswith("re-used")
    assert num_features > len(examples) and not reused  # several windows per question
    assert task.num_train_steps == int(10 / 4 * 2) and task.num_warmup_steps == 0
    # The windows come from the examples in the order random.Random(12345) shuffles them.
    expected = list(examples)
    random.Random(12345).shuffle(expected)
    first = next(squad_task.shuffled_training_features(examples, tokenizer, 32, 16, 8))
    question_ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(expected[0].question_text))
    assert first.input_ids[1:1 + len(question_ids)] == question_ids


def test_squad_training_features_streamed_to_a_file_give_the_in_memory_batches(tmp_path):
    """The cached train.tf_record, shuffled with the seed, yields the batches the features held
    in memory yield (from_tensor_slices, the same shuffle), also when resumed at a batch; it is
    re-used as long as nothing it depends on changes, and rebuilt when --doc_stride does."""
    tokenizer = FullTokenizer(os.path.join(DATA, "bert_postln_tiny", "vocab.txt"), do_lower_case=True)
    examples = _squad_examples(tokenizer, 40)
    path = str(tmp_path / "train.tf_record")
    reused, count = squad_task.write_training_features(examples, tokenizer, 32, 16, 8, path)
    arrays = squad_task.feature_arrays(list(squad_task.shuffled_training_features(examples, tokenizer, 32, 16, 8)),
                                       True)
    assert not reused and count == len(arrays["input_ids"]) > 100
    for start, buffer in ((0, 0), (5, 0), (0, 100), (5, 100)):  # 0: a permutation per epoch; 100: the original
        streamed = squad_task.training_dataset(path, 32, 8, seed=7, start_batch=start, num_features=count,
                                               shuffle_buffer_size=buffer).take(4)
        held = tf.data.Dataset.from_tensor_slices(arrays)
        held = held.repeat().shuffle(100, seed=7) if buffer else held.shuffle(count, seed=7).repeat()
        held = held.skip(start * 8).batch(8, drop_remainder=True).take(4)
        for a, b in zip(streamed, held, strict=True):
            assert a.keys() == b.keys()
            for key in a:
                np.testing.assert_array_equal(a[key].numpy(), b[key].numpy(), err_msg=key)
    assert squad_task.write_training_features(examples, tokenizer, 32, 16, 8, path) == (True, count)
    reused, other = squad_task.write_training_features(examples, tokenizer, 32, 8, 8, path)
    assert not reused and other > count


# ---------------------------------------------------------------------- progress
class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_lines_and_terminal_bar():
    plain = io.StringIO()
    progress = Progress(total_steps=10, examples_per_step=32, stream=plain)
    first = progress.update(1, {"loss": 1.75})  # mostly tracing: no rate, no ETA
    assert first == "step 1/10: loss 1.7500"
    line = progress.update(5, {"loss": 1.5, "masked_lm_loss": 1.25, "gradient_norm": 3.0})
    assert line.startswith("step 5/10: loss 1.5000 (masked_lm_loss 1.2500), ")
    assert "examples/s" in line and "ETA" in line and "gradient_norm" not in line
    assert plain.getvalue() == first + "\n" + line + "\n"
    terminal = _Terminal()
    bar = Progress(total_steps=10, examples_per_step=32, stream=terminal)
    bar.update(5, {"loss": 1.0})
    bar.update(10, {"loss": 0.5})
    text = terminal.getvalue()
    assert text.startswith("\r[" + "=" * 15 + "." * 15 + "] step 5/10")
    assert text.count("\r") == 2 and text.endswith("\n") and text.count("\n") == 1


def test_folded_weight_names_name_a_lone_layer_and_keep_top_level_names_bare():
    from bert_realformer.checkpoints.training_states import fold_layer_names
    names = [f"bert/encoder/layer_2/attention/output/{leaf}" for leaf in ("dense/kernel", "dense/bias")]
    names += [f"bert/encoder/layer_{i}/output/LayerNorm/{leaf}" for i in (0, 1) for leaf in ("beta", "gamma")]
    names += ["output_weights", "output_bias"]
    assert fold_layer_names(names, shown=6) == (
        "8 weights: bert/encoder/layer_2/attention/output/dense/{kernel,bias}, "
        "bert/encoder/layer_*/output/LayerNorm/{beta,gamma}, {output_weights,output_bias}")
