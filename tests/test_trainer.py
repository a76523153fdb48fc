"""The training loop: distribution and accumulation equivalence, mixed precision, PLD."""

import json
import os
import sys
import types

import keras
import numpy as np
import pytest
import tensorflow as tf
from helpers import script_processes

import modeling
from bert_realformer.pretraining import pld
from bert_realformer.pretraining.losses import pretraining_totals, replica_pretraining_loss
from bert_realformer.training.distribution import cluster_index
from bert_realformer.training.optimization import create_optimizer
from bert_realformer.training.trainer import TrainLoop, distributed_input, micro_batch, stacked_micro_batches

HERE = os.path.dirname(os.path.abspath(__file__))


def _assert_same_run(a, b, name):
    losses, weights, steps = a
    other_losses, other_weights, other_steps = b
    assert other_steps == steps == 3, name
    np.testing.assert_allclose(other_losses, losses, atol=1e-5, err_msg=name)
    for x, y in zip(other_weights, weights):
        np.testing.assert_allclose(x, y, atol=1e-5, err_msg=name)


@pytest.fixture(scope="module")
def equivalence_runs():
    result = script_processes.run([sys.executable, os.path.join(HERE, "helpers", "train_equivalence.py")],
                            capture_output=True, text=True, timeout=900,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(text for text in result.stdout.splitlines() if text.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


@pytest.mark.slow
def test_accumulated_micro_batches_equal_the_whole_batch(equivalence_runs):
    """Global batch 8 for 3 steps, MLM weights partly 0, dropout off: one device, and 2
    micro-batches of 4 accumulated: the same losses and weights within 1e-5 (float32 summation
    order). (Replicas are compared with dropout on, below: a stronger test of the same code.)"""
    runs = equivalence_runs
    losses = runs["one_device"][0]
    assert losses[2] < losses[0] + 0.5
    _assert_same_run(runs["one_device"], runs["one_device_accumulated"], "one_device_accumulated")


@pytest.mark.slow
def test_with_dropout_replicas_draw_their_own_masks_and_equal_accumulation(equivalence_runs):
    """Dropout 0.2, mirrored over 2 logical CPUs: each replica draws its own masks (on identical
    inputs they differ, and the same step draws them again identically); mirrored(2 x 4) equals
    one device accumulating 2 x 4 and mirrored + accumulated equals one device accumulating
    4 x 2, because the pieces of a global batch get the same per-example masks either way; and
    the losses are not those of the same run without dropout (so dropout is really on)."""
    assert equivalence_runs["replicas"] == 2
    runs = equivalence_runs["dropout"]
    first, second = equivalence_runs["replica_masks"]
    assert first == second
    replica_0, replica_1 = (np.array(m) for m in first)
    assert not np.array_equal(replica_0, replica_1)
    assert 0.3 < np.mean(replica_0 == 0) < 0.7 and set(np.unique(replica_0)) == {0.0, 2.0}
    _assert_same_run(runs["one_device_2x4"], runs["mirrored"], "mirrored vs one device 2x4")
    _assert_same_run(runs["one_device_4x2"], runs["mirrored_accumulated"], "mirrored+accumulated vs 4x2")
    assert not np.allclose(equivalence_runs["one_device_accumulated"][0], runs["one_device_2x4"][0], atol=1e-4)


@pytest.mark.slow
def test_fgm_rdrop_and_weight_averages_on_two_replicas_equal_one_device(equivalence_runs):
    """A classifier trained with FGM (epsilon 1), R-Drop (alpha 1) and weight averages (decay
    0.5), dropout 0.2: mirrored over 2 replicas (2 x 4) equals one device accumulating 2 x 4 in
    losses, weights and averages; both replicas hold the same averages, which are not the weights."""
    runs = equivalence_runs["regularized"]
    _assert_same_run(runs["one_device_2x4"][:3], runs["mirrored"][:3], "regularized: mirrored vs one device 2x4")
    one_device, (mirrored, weights) = runs["one_device_2x4"][3], runs["mirrored"][3:]
    assert len(mirrored) == len(weights) > 30
    for (expected,), (first, second) in zip(one_device, mirrored):
        np.testing.assert_allclose(first, expected, atol=1e-5)
        np.testing.assert_array_equal(first, second)
    assert not np.allclose(mirrored[0][0], weights[0], atol=1e-4)  # (the word embeddings)


@pytest.mark.slow
def test_predict_under_mirrored_equals_one_device_in_order(equivalence_runs):
    one, mirrored = (np.array(equivalence_runs[k]) for k in ("predict_one_device", "predict_mirrored"))
    assert one.shape == (5, 2)
    np.testing.assert_allclose(mirrored, one, atol=1e-6)


def test_stacked_micro_batches_give_each_replica_its_own_each_cut_back_to_its_length():
    """Per-replica batches k = 0..8 (one row of k + 1 tokens, each token k + 1) taken by 2
    replicas in turn, 2 micro-batches a step: a step's micro-batch m of replica r is batch
    2m + r (as the replicas read them one micro-batch after another), the 4 of a step stacked
    padded with zeros to its longest, and `micro_batch` gives each back as it was; the ninth
    batch, a partial step, is dropped."""
    batches = [np.full((1, k + 1), k + 1, "int32") for k in range(9)]
    dataset = tf.data.Dataset.from_generator(lambda: ({"input_ids": b} for b in batches),
                                             output_signature={"input_ids": tf.TensorSpec([1, None], tf.int32)})
    got = list(stacked_micro_batches(dataset, 2, 2))

    def padded(k, length):
        return np.pad(batches[k], [[0, 0], [0, length - k - 1]])
    expected = [((0, 2), 4), ((1, 3), 4), ((4, 6), 8), ((5, 7), 8)]  # (the batches of the stack, its length)
    assert len(got) == len(expected)
    for (stacked, sizes), (ks, length) in zip(got, expected):
        np.testing.assert_array_equal(stacked["input_ids"], np.stack([padded(k, length) for k in ks]))
        for index, k in enumerate(ks):
            np.testing.assert_array_equal(micro_batch(stacked, sizes, tf.constant(index))["input_ids"], batches[k])
    fixed = tf.data.Dataset.from_tensor_slices({"input_ids": np.arange(8).reshape(4, 1, 2)})
    for (stacked, sizes), ks in zip(stacked_micro_batches(fixed, 2, 2), ((0, 2), (1, 3)), strict=True):
        assert sizes == {}  # (fixed shapes: nothing to cut back)
        np.testing.assert_array_equal(stacked["input_ids"], np.arange(8).reshape(4, 1, 2)[list(ks)])


def test_micro_batches_of_other_lengths_accumulate_to_the_whole_batch(float32_policy):
    """Dynamic padding: a step's 2 micro-batches of 6, or 3 of 4 (a pair in the loop and one
    left over), each cut to its longest, accumulated (stacked, then each run at its own
    length), make the same 3 steps as the whole batch of 12 at 12 tokens: losses and weights
    within 1e-5."""
    config = modeling.BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                 intermediate_size=32, max_position_embeddings=16, type_vocab_size=2,
                                 hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    rng = np.random.RandomState(4)
    lengths = np.array([3, 6, 5, 4, 2, 5, 12, 7, 10, 9, 4, 8])
    mask = (np.arange(12)[None, :] < lengths[:, None]).astype("int32")
    whole = {"input_ids": rng.randint(1, 40, size=(12, 12)).astype("int32") * mask, "input_mask": mask,
             "segment_ids": np.zeros((12, 12), "int32"),
             "masked_lm_positions": (rng.rand(12, 2) * lengths[:, None]).astype("int32"),
             "masked_lm_ids": rng.randint(1, 40, size=(12, 2)).astype("int32"),
             "masked_lm_weights": np.ones((12, 2), "float32"),
             "next_sentence_labels": rng.randint(0, 2, size=(12, 1)).astype("int32")}

    def micro_batches(n):
        """The whole batch in `n` micro-batches, each cut to its longest."""
        pieces = []
        for rows in np.split(np.arange(12), n):
            longest = lengths[rows].max()
            pieces.append(tf.data.Dataset.from_tensors({
                k: v[rows, :longest] if k in ("input_ids", "input_mask", "segment_ids") else v[rows]
                for k, v in whole.items()}))
        dataset = pieces[0]
        for piece in pieces[1:]:
            dataset = dataset.concatenate(piece)
        return dataset

    def three_steps(dataset, batch_size, accumulation):
        keras.utils.set_random_seed(3)
        strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
        with strategy.scope():
            model = modeling.BertPretrainer(config)
            model.build()
            loop = TrainLoop(strategy, model, create_optimizer(1e-2, 100, 0),
                             lambda m, f, step, totals: replica_pretraining_loss(m(f, training=True), f, totals),
                             pretraining_totals, accumulation_steps=accumulation)
        iterator = iter(distributed_input(strategy, dataset.repeat, batch_size, accumulation))
        losses = [float(loop.train_step(iterator)["loss"]) for _ in range(3)]
        return losses, [w.numpy() for w in model.trainable_weights]
    at_once = three_steps(tf.data.Dataset.from_tensors(whole), 12, 1)
    assert at_once[0][2] < at_once[0][0]
    for n in (2, 3):
        accumulated = three_steps(micro_batches(n), 12 // n, n)
        np.testing.assert_allclose(accumulated[0], at_once[0], atol=1e-5, err_msg=f"{n} micro-batches")
        for a, b in zip(accumulated[1], at_once[1]):
            np.testing.assert_allclose(a, b, atol=1e-5, err_msg=f"{n} micro-batches")


class _RecordingStrategy:
    """A strategy of one input pipeline for `devices` that keeps the dataset it would distribute."""

    def __init__(self, *devices):
        self.extended = types.SimpleNamespace(worker_devices=tuple(
            f"/job:localhost/replica:0/task:0/device:{device}" for device in devices))

    def distribute_datasets_from_function(self, pipeline):
        self.dataset = pipeline(tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0,
                                                           num_replicas_in_sync=len(self.extended.worker_devices)))
        return self.dataset


def test_training_input_on_one_cpu_is_the_dataset_itself_read_without_tf_data_autotuning():
    """(the strategy's distributed iterator tunes its per-device datasets, and releasing it waited
    17-51 s on that tuning at the end of a run: BENCHMARKS.md); several CPUs read their pipelines
    without autotuning too, GPUs keep it; the batches are the same"""
    batches = tf.data.Dataset.range(12).batch(4).map(lambda x: {"input_ids": x})
    expected = [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    one_cpu = distributed_input(tf.distribute.OneDeviceStrategy("/cpu:0"), lambda: batches, 4)
    assert isinstance(one_cpu, tf.data.Dataset)
    assert one_cpu.options().autotune.enabled is False
    assert [b["input_ids"].tolist() for b in one_cpu.as_numpy_iterator()] == expected
    per_replica = [half for batch in expected for half in (batch[:2], batch[2:])]
    for devices, autotuned, read in ((("CPU:0", "CPU:1"), False, per_replica), (("GPU:0",), None, expected)):
        strategy = _RecordingStrategy(*devices)
        distributed_input(strategy, lambda: batches, 4)
        assert strategy.dataset.options().autotune.enabled is autotuned, devices
        assert [b["input_ids"].tolist() for b in strategy.dataset.as_numpy_iterator()] == read, devices
    assert batches.options().autotune.enabled is None  # (the task's dataset unchanged)


@pytest.mark.parametrize("cluster, task_type, task_id", [
    ({"worker": ["a:1", "b:1"]}, "worker", 0), ({"worker": ["a:1", "b:1"]}, "worker", 1),
    ({"chief": ["c:1"], "worker": ["a:1", "b:1"]}, "chief", 0),
    ({"chief": ["c:1"], "worker": ["a:1", "b:1"]}, "worker", 1),
    ({"chief": ["c:1"], "worker": ["a:1"], "ps": ["p:1"]}, "worker", 0)])
def test_a_workers_input_pipeline_is_numbered_as_multi_worker_mirrored_strategy_numbers_it(cluster, task_type,
                                                                                           task_id):
    """(a worker on a CPU machine reads its own pipeline, not the strategy's distributed dataset:
    it must keep the slice the strategy would give it)"""
    from tensorflow.python.distribute import multi_worker_util
    spec = tf.train.ClusterSpec(cluster)
    workers = multi_worker_util.worker_count(spec, task_type)
    assert cluster_index(cluster, task_type, task_id) == (
        workers, multi_worker_util.id_in_cluster(spec, task_type, task_id))


def _tiny_realformer_loop(policy):
    keras.config.set_dtype_policy(policy)
    config = modeling.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=3,
                                 num_attention_heads=2, intermediate_size=32,
                                 max_position_embeddings=32, type_vocab_size=2,
                                 residual_attention="sum")
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        model = modeling.BertPretrainer(config)
        model.build()
        optimizer = create_optimizer(1e-3, 200, 20)

        def loss_fn(model, features, step, totals):
            return replica_pretraining_loss(model(features, training=True), features, totals)

        loop = TrainLoop(strategy, model, optimizer, loss_fn, pretraining_totals,
                         loss_scaling=policy == "mixed_float16")
    rng = np.random.RandomState(0)
    mask = (np.arange(32)[None, :] < rng.randint(4, 33, size=(64, 1))).astype("int32")
    data = {"input_ids": rng.randint(1, 50, size=(64, 32)).astype("int32") * mask, "input_mask": mask,
            "segment_ids": np.zeros((64, 32), "int32"),
            "masked_lm_positions": rng.randint(0, 4, size=(64, 3)).astype("int32"),
            "masked_lm_ids": rng.randint(1, 50, size=(64, 3)).astype("int32"),
            "masked_lm_weights": np.ones((64, 3), "float32"),
            "next_sentence_labels": rng.randint(0, 2, size=(64, 1)).astype("int32")}
    dataset = tf.data.Dataset.from_tensor_slices(data).repeat().batch(8)
    return loop, iter(strategy.experimental_distribute_dataset(dataset)), model


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_realformer_200_steps_stay_finite(float32_policy, policy):
    loop, iterator, model = _tiny_realformer_loop(policy)
    watched = model.bert.embeddings.word_embeddings
    losses, scales, updated = [], [float(loop.loss_scale.numpy())], []
    for _ in range(200):
        before, step = watched.numpy().copy(), int(loop.optimizer.iterations.numpy())
        metrics = loop.train_step(iterator)
        losses.append(float(metrics["loss"]))
        scales.append(float(metrics["loss_scale"]))
        advanced = int(loop.optimizer.iterations.numpy()) == step + 1
        # Step 0's learning rate is 0 (warmup): the step counts but the weights stay.
        assert advanced == (step == 0 or not np.array_equal(before, watched.numpy()))
        updated.append(advanced)
    assert np.all(np.isfinite(losses))
    assert np.mean(losses[-20:]) < np.mean(losses[:20])
    assert all(w.dtype == "float32" for w in model.weights)
    # The carried RealFormer sum is float32 under this policy.
    block = model.bert.encoder.blocks[1]
    x = keras.ops.ones((1, 4, 16))
    _, scores = block(x, prev_attens=keras.ops.ones((1, 2, 4, 4)))
    assert keras.backend.standardize_dtype(scores.dtype) == "float32"
    if policy == "mixed_float16":
        # Each step either applied its update with the scale kept (no doubling before 2000
        # finite steps) or skipped it and halved the scale.
        assert scales[0] == 2.0 ** 15
        for step, (old, new, applied) in enumerate(zip(scales, scales[1:], updated)):
            assert (new == old and applied) or (new == max(old / 2, 1.0) and not applied), step
        assert sum(updated) > 150
    else:
        assert scales == [1.0] * 201 and all(updated)


def test_fp16_overflow_step_changes_nothing_and_halves_the_scale(float32_policy):
    loop, iterator, model = _tiny_realformer_loop("mixed_float16")
    loop.loss_scale.assign(2.0 ** 100)  # guarantees inf gradients
    before = [w.numpy().copy() for w in model.trainable_weights]
    loop.train_step(iterator)
    assert float(loop.loss_scale.numpy()) == 2.0 ** 99
    for a, w in zip(before, model.trainable_weights):
        np.testing.assert_array_equal(a, w.numpy())


def test_pld_schedule_by_hand():
    p = np.asarray(pld.keep_probabilities(0, 4, theta_bar=0.5, gamma=0.001))
    np.testing.assert_allclose(p, [1.0, 1.0, 1.0, 1.0])
    theta = 0.5 * np.exp(-0.001 * 1000) + 0.5
    p = np.asarray(pld.keep_probabilities(1000, 4, theta_bar=0.5, gamma=0.001))
    np.testing.assert_allclose(p, [1 - layer / 4 * (1 - theta) for layer in (1, 2, 3, 4)], rtol=1e-6)


def test_pld_skips_layers_and_keeps_all_at_eval():
    config = modeling.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=3,
                                 num_attention_heads=2, intermediate_size=32,
                                 hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                 residual_attention="sum")
    model = modeling.BertModel(config)
    ids = np.random.RandomState(0).randint(1, 50, size=(2, 8)).astype("int32")
    full = model(ids, training=False)
    skipped = model(ids, training=True, layer_keep_probs=np.full(3, 1e-9, "float32"))
    for layer in skipped["all_encoder_layers"]:  # every layer skipped: embeddings pass through
        np.testing.assert_allclose(layer, skipped["embedding_output"], atol=1e-6)
    kept = model(ids, training=True, layer_keep_probs=np.ones(3, "float32"))
    np.testing.assert_allclose(kept["sequence_output"], full["sequence_output"], atol=1e-5)
    evaluated = model(ids, training=False, layer_keep_probs=np.full(3, 1e-9, "float32"))
    np.testing.assert_allclose(evaluated["sequence_output"], full["sequence_output"], atol=1e-6)


def _three_compiled_steps(accumulation_steps, random_draws, jit_compile):
    """(last loss, initial weights, weights) after a tf.function of 3 attempts on one fixed
    batch, on the pretraining loss with RealFormer and fp16 loss scaling; `random_draws`:
    dropout and PLD."""
    from bert_realformer.pretraining.task import pretraining_task
    keras.utils.set_random_seed(7)
    dropout = 0.1 if random_draws else 0.0
    config = modeling.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                                 intermediate_size=32, max_position_embeddings=32, type_vocab_size=2,
                                 residual_attention="sum", hidden_dropout_prob=dropout,
                                 attention_probs_dropout_prob=dropout)
    task = pretraining_task([], 8, 32, 3, 1e-3, 100, 10, pld_options=(0.5, 0.01) if random_draws else None)
    strategy = tf.distribute.OneDeviceStrategy("/cpu:0")
    with strategy.scope():
        model = modeling.BertPretrainer(config)
        model.build()
        loop = TrainLoop(strategy, model, create_optimizer(1e-3, 100, 1), task.loss_fn, task.totals_fn,
                         task.metric_names, accumulation_steps=accumulation_steps, loss_scaling=True)
    initial = [w.numpy() for w in model.trainable_weights]
    rng = np.random.RandomState(0)
    mask = (np.arange(32)[None, :] < rng.randint(4, 33, size=(8, 1))).astype("int32")
    batch = {"input_ids": tf.constant(rng.randint(1, 50, size=(8, 32)).astype("int32") * mask),
             "input_mask": tf.constant(mask), "segment_ids": tf.zeros((8, 32), tf.int32),
             "masked_lm_positions": tf.constant(rng.randint(0, 4, size=(8, 3)).astype("int32")),
             "masked_lm_ids": tf.constant(rng.randint(1, 50, size=(8, 3)).astype("int32")),
             "masked_lm_weights": tf.ones((8, 3)), "next_sentence_labels": tf.zeros((8, 1), tf.int32)}

    if accumulation_steps > 1:  # (each replica's micro-batches of a step come stacked; every shape fixed)
        batch = ({name: tf.stack([value] * accumulation_steps) for name, value in batch.items()}, {})

    @tf.function(jit_compile=jit_compile)
    def steps():
        loss = tf.zeros(())
        for _ in tf.range(3):
            loss = loop.attempt_on(batch)["loss"]
        return loss

    loss = float(steps())
    assert int(loop.optimizer.iterations.numpy()) == 3 and np.isfinite(loss)
    return loss, initial, [w.numpy() for w in model.trainable_weights]


@pytest.mark.slow
def test_the_whole_step_loop_compiles_with_xla_as_a_tpu_needs(float32_policy):
    """A TPU compiles the step function whole: loops of steps with dropout, PLD, RealFormer,
    accumulated micro-batches and fp16 loss scaling must hold no host-only or string op and only
    static shapes, i.e. compile with `jit_compile=True` (here on the CPU), and train: three
    steps taken, the loss finite, every weight moved."""
    _, initial, trained = _three_compiled_steps(2, random_draws=True, jit_compile=True)
    moved = [not np.array_equal(a, b) for a, b in zip(initial, trained)]
    assert moved[0] and sum(moved) > len(moved) / 2  # the word embeddings, and most weights
    # (a layer PLD skipped in all three steps keeps its LayerNorm and biases: no decay on them)


@pytest.mark.slow
def test_the_compiled_step_loop_computes_the_uncompiled_steps(float32_policy):
    """Without random draws (XLA's stateless generator differs from the kernels' one, so dropout
    masks differ between the two), the compiled loop gives the uncompiled loop's steps; one
    micro-batch a step (the loop without accumulation; the test above compiles it with two)."""
    compiled_loss, _, compiled = _three_compiled_steps(1, random_draws=False, jit_compile=True)
    plain_loss, _, plain = _three_compiled_steps(1, random_draws=False, jit_compile=False)
    assert abs(compiled_loss - plain_loss) < 1e-4 * plain_loss  # fused in another order
    for a, b in zip(compiled, plain):
        np.testing.assert_allclose(a, b, atol=1e-4)
