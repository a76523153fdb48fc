"""Moving averages of the weights (`finetuning.averaging`), adversarial training on the word
embeddings (`finetuning.adversarial`) and R-Drop (`tasks.classification.losses`): their math
against hand computations and first-order theory, a perturbation that depends on its own
example alone (what makes replicas and micro-batches agree), fp16 against float32, and the
second dropout pass's own random stream."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import modeling
from bert_realformer.finetuning.adversarial import Adversary, onto_ball, per_example_unit, word_vector_norms
from bert_realformer.finetuning.averaging import WeightAverages
from bert_realformer.tasks.classification.losses import ClassifierLoss
from bert_realformer.tasks.classification.task import classifier_loss_fn
from bert_realformer.training import recorded_options

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "tests", "data", "bert_postln_tiny")


def _config(dropout=0.0):
    with open(os.path.join(TINY, "bert_config.json")) as f:
        config = modeling.BertConfig.from_dict(json.load(f))
    return config.replace(hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)


def _classifier(dropout=0.0, seed=3):
    keras.utils.set_random_seed(seed)
    model = modeling.BertClassifier(_config(dropout), num_labels=3)
    model.build()
    model.classifier.dropout.rate = dropout  # (the head's own 0.1 as well)
    return model


def _features(batch=4, length=10, seed=0):
    rng = np.random.RandomState(seed)
    mask = (np.arange(length)[None, :] < rng.randint(4, length + 1, size=(batch, 1))).astype("int32")
    return {"input_ids": tf.constant(rng.randint(1, 128, size=(batch, length)) * mask, tf.int32),
            "input_mask": tf.constant(mask), "segment_ids": tf.zeros((batch, length), tf.int32),
            "label_ids": tf.constant(rng.randint(0, 3, size=batch), tf.int32)}


def _totals(features):
    return {"examples": tf.cast(tf.shape(features["label_ids"])[0], tf.float32)}


# ------------------------------------------------------------------ moving averages
def test_averages_step_by_hand_skip_a_step_that_changed_nothing_and_swap_in_and_out():
    model = _classifier()
    averages = WeightAverages(model, 0.9)
    kernel = model.classifier.output_weights
    start = kernel.numpy().copy()
    kernel.assign(start + 1.0)
    averages.update(tf.constant(True))
    average = averages.averages["output_weights"]
    np.testing.assert_allclose(average.numpy(), 0.9 * start + 0.1 * (start + 1.0), rtol=1e-6)
    kernel.assign(start + 5.0)
    averages.update(tf.constant(False))  # (a skipped step: the weights did not change)
    np.testing.assert_allclose(average.numpy(), start + 0.1, rtol=1e-6)
    assert set(averages.averages) == {name for name, v in modeling.tf1_variable_map(model).items() if v.trainable}

    with averages.swapped_in():
        np.testing.assert_allclose(kernel.numpy(), start + 0.1, rtol=1e-6)
    np.testing.assert_array_equal(kernel.numpy(), start + 5.0)
    averages.reset()
    np.testing.assert_array_equal(average.numpy(), start + 5.0)
    with pytest.raises(ValueError, match="decay must be in"):
        WeightAverages(model, 1.0)


def test_a_resumed_run_keeps_the_averages_it_started_with(tmp_path):
    recorded_options.update(str(tmp_path), ema_decay=0.99, adam_bias_correction=True)
    assert recorded_options.resumed_bias_correction(str(tmp_path), True, "adamw") == (True, None)
    decay, line = recorded_options.resumed_ema_decay(str(tmp_path), 0.0)
    assert decay == 0.99
    assert line == (f"resuming with weight averages of decay 0.99, as this run started "
                    f"({tmp_path}/training_options.json); an EMA decay of 0 applies to new runs")
    recorded_options.update(str(tmp_path), ema_decay=0.0)
    decay, line = recorded_options.resumed_ema_decay(str(tmp_path), 0.5)
    assert decay == 0.0 and line.startswith("resuming with no weight averages")


# ------------------------------------------------------------------ adversarial training
def test_unit_and_ball_by_hand():
    g = tf.constant([[[3.0, 0.0], [0.0, 4.0]], [[0.0, 0.0], [0.0, 0.0]], [[np.inf, 1.0], [0.0, 0.0]]])
    np.testing.assert_allclose(per_example_unit(g).numpy(),
                               [[[0.6, 0.0], [0.0, 0.8]], [[0.0, 0.0], [0.0, 0.0]], [[0.0, 0.0], [0.0, 0.0]]])
    r = tf.constant([[[3.0, 0.0], [0.0, 4.0]], [[0.3, 0.0], [0.0, 0.4]]])
    np.testing.assert_allclose(onto_ball(r, 1.0).numpy(), [[[0.6, 0.0], [0.0, 0.8]], [[0.3, 0.0], [0.0, 0.4]]],
                               rtol=1e-6)


def _loss_with(model, features, delta):
    """The classifier's mean cross-entropy with `delta` added to the word vectors (the head's
    dropout drawing the same masks every time, as in one step of training)."""
    with modeling.random_stream(0, 0):
        loss, _ = classifier_loss_fn(ClassifierLoss())(model, {**features, modeling.WORD_EMBEDDING_DELTA: delta}, 0,
                                                         _totals(features))
    return loss


def _perturbation(adversary, model, features, size=1.0):
    shape = tf.concat([tf.shape(features["input_ids"]), [model.config.hidden_size]], 0)
    zero = tf.zeros(shape)
    with tf.GradientTape() as tape:
        tape.watch(zero)
        clean = _loss_with(model, features, zero)
    return adversary.perturbation(lambda d: _loss_with(model, features, d), zero, clean, tape, size).numpy()


def test_fgm_is_the_steepest_ascent_of_norm_epsilon_per_example():
    """For a small epsilon the loss rises by epsilon * ||g|| to first order along g/||g||, more
    than along any random direction of the same norm; each example's r has norm epsilon (times
    the size it is a share of); and the wrapped loss is the clean loss plus the loss at r, r a
    share of each example's word vectors' norm."""
    model, features = _classifier(), _features()
    r = _perturbation(Adversary("fgm", 1e-2), model, features)
    np.testing.assert_allclose(np.sqrt((r ** 2).sum(axis=(1, 2))), 1e-2, rtol=1e-5)
    clean = float(_loss_with(model, features, tf.zeros_like(r)))
    rise = float(_loss_with(model, features, r)) - clean
    rng = np.random.RandomState(0)
    for _ in range(5):
        other = rng.normal(size=r.shape).astype("float32")
        other *= 1e-2 / np.sqrt((other ** 2).sum(axis=(1, 2), keepdims=True))
        assert float(_loss_with(model, features, other)) - clean < rise
    # first order: sum over examples of epsilon * ||g_i|| (g of the mean loss)
    zero = tf.zeros_like(r)
    with tf.GradientTape() as tape:
        tape.watch(zero)
        loss = _loss_with(model, features, zero)
    g = tape.gradient(loss, zero).numpy()
    np.testing.assert_allclose(rise, 1e-2 * np.sqrt((g ** 2).sum(axis=(1, 2))).sum(), rtol=0.05)

    # the wrapped loss: epsilon a share of each example's word vectors' norm (its real tokens')
    table = model.bert.get_embedding_table().numpy()
    mask = features["input_mask"].numpy()[..., None]
    norms = np.sqrt(((table[features["input_ids"].numpy()] * mask) ** 2).sum(axis=(1, 2)))
    np.testing.assert_allclose(word_vector_norms(model, features).numpy().ravel(), norms, rtol=1e-5)
    relative = _perturbation(Adversary("fgm", 1e-2), model, features, size=norms[:, None, None])
    np.testing.assert_allclose(np.sqrt((relative ** 2).sum(axis=(1, 2))), 1e-2 * norms, rtol=1e-5)
    wrapped = Adversary("fgm", 1e-2).wrap(classifier_loss_fn(ClassifierLoss()))
    with modeling.random_stream(0, 0):
        total, metrics = wrapped(model, features, 0, _totals(features))
    np.testing.assert_allclose(float(total), clean + float(_loss_with(model, features, relative)), rtol=1e-5)
    np.testing.assert_allclose(float(metrics["loss"]), clean, rtol=1e-6)  # (the clean pass's)


def test_the_default_epsilon_is_the_size_measured_to_learn_and_a_stalling_one_is_warned_of():
    assert Adversary("fgm").epsilon == 0.001 and Adversary("fgm").warning() is None
    assert Adversary("pgd", 0.0029).warning() is None
    for epsilon in (0.003, 0.01):
        line = Adversary("pgd", epsilon).warning()
        assert line.startswith(f"warning: --adversarial_epsilon={epsilon:g}: a perturbation of 0.003 or more of "
                               "the word vectors' norm kept small models at chance"), line


def test_an_examples_perturbation_does_not_depend_on_the_rest_of_its_batch():
    """What makes two replicas (or two accumulated micro-batches) perturb as one device: each
    example's r is the same alone as within a batch, whatever the batch's size scales the loss by."""
    model, features = _classifier(), _features(batch=4)
    for adversary in (Adversary("fgm", 1.0), Adversary("pgd", 1.0, steps=3)):
        whole = _perturbation(adversary, model, features)
        half = _perturbation(adversary, model, {k: v[2:] for k, v in features.items()})
        np.testing.assert_allclose(half, whole[2:], atol=1e-5)


def test_pgd_stays_in_the_ball_climbs_higher_than_its_first_step_and_one_step_is_fgm():
    model, features = _classifier(), _features()
    pgd = _perturbation(Adversary("pgd", 2.0, steps=4), model, features)
    assert np.all(np.sqrt((pgd ** 2).sum(axis=(1, 2))) <= 2.0 + 1e-5)
    first = _perturbation(Adversary("pgd", 2.0 / 4, steps=1), model, features)  # its first step alone
    assert float(_loss_with(model, features, pgd)) > float(_loss_with(model, features, first))
    np.testing.assert_allclose(_perturbation(Adversary("pgd", 0.5, steps=1), model, features),
                               _perturbation(Adversary("fgm", 0.5), model, features), atol=1e-6)


def test_under_fp16_the_perturbation_points_where_float32s_does():
    features = _features()
    model = _classifier()
    expected = _perturbation(Adversary("fgm", 1.0), model, features)
    weights = model.get_weights()
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy("mixed_float16")
    try:
        half = _classifier()
        half.set_weights(weights)
        got = _perturbation(Adversary("fgm", 1.0), half, features)
    finally:
        keras.config.set_dtype_policy(previous)
    assert np.all(np.isfinite(got))
    cosine = (got * expected).sum(axis=(1, 2)) / np.sqrt((got ** 2).sum(axis=(1, 2)) * (expected ** 2).sum(axis=(1, 2)))
    assert np.all(cosine > 0.99), cosine


# ------------------------------------------------------------------ R-Drop
def test_rdrop_loss_by_hand():
    a = np.array([[2.0, 0.0, -1.0], [0.5, 0.5, 0.0]], np.float32)
    b = np.array([[1.0, 1.0, 0.0], [0.0, 2.0, 0.0]], np.float32)
    labels = np.array([0, 2])

    def softmax(z):
        e = np.exp(z - z.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    p, q = softmax(a), softmax(b)
    ce = -np.log(p[[0, 1], labels]), -np.log(q[[0, 1], labels])
    kl = (p * np.log(p / q)).sum(-1) + (q * np.log(q / p)).sum(-1)
    weights = np.array([2.0, 0.5])
    expected = (weights * (0.5 * (ce[0] + ce[1]) + 0.25 * 3.0 * kl)).sum()
    loss = ClassifierLoss(class_weights=(2.0, 1.0, 0.5), rdrop_alpha=3.0)
    np.testing.assert_allclose(float(loss.rdrop_weighted_sum(tf.constant(a), tf.constant(b), tf.constant(labels))),
                               expected, rtol=1e-5)
    assert not loss.is_original


def test_rdrops_second_pass_draws_other_masks_and_the_same_again():
    """In a step's random stream the second pass draws other masks than the first and the same
    ones when the step runs again; the loss is R-Drop's of those two passes."""
    model, features = _classifier(dropout=0.3), _features()
    loss = ClassifierLoss(rdrop_alpha=1.0)
    rdrop = classifier_loss_fn(loss)

    def in_stream(fn, stream=0):
        with modeling.random_stream(5, stream):
            return float(fn(model, features, 5, _totals(features))[0])
    assert in_stream(rdrop) == in_stream(rdrop)
    assert in_stream(rdrop) != in_stream(rdrop, stream=1)
    with modeling.random_stream(5, 0):
        first = model(features, training=True).numpy()
        with modeling.second_pass():
            second = model(features, training=True).numpy()
    assert not np.allclose(first, second)
    expected = loss.rdrop_weighted_sum(tf.constant(first), tf.constant(second), features["label_ids"]) / 4
    np.testing.assert_allclose(in_stream(rdrop), float(expected), rtol=1e-5)


def test_a_training_state_with_averages_is_read_as_its_averages(tmp_path):
    """What an evaluation or prediction in another process loads from a run's training state
    (it wins a tie with model.ckpt-N): the averages the run exported, not the weights it trained."""
    from bert_realformer.checkpoints import training_states
    weights = {"bert/pooler/dense/kernel": tf.Variable(np.ones((2, 2), np.float32)),
               "output_bias": tf.Variable(np.zeros(2, np.float32))}
    averages = {"bert/pooler/dense/kernel": tf.Variable(np.full((2, 2), 0.5, np.float32))}
    tf.train.Checkpoint(variables=weights, averages=averages).save(str(tmp_path / "training_state" / "ckpt"))
    read = training_states.read_training_state(str(tmp_path))
    np.testing.assert_array_equal(read["bert/pooler/dense/kernel"], np.full((2, 2), 0.5))
    np.testing.assert_array_equal(read["output_bias"], np.zeros(2))
    assert sorted(read) == sorted(weights)


def test_every_task_model_adds_the_perturbation_to_its_word_vectors():
    """Zeros change no output and a perturbation changes them, for every fine-tuning model
    (multiple choice's [B, C, S] inputs take a [B, C, S, H] perturbation)."""
    config = _config()
    features = _features(batch=2, length=8)
    choices = {k: tf.stack([v, v[::-1]], axis=1) for k, v in features.items() if k != "label_ids"}
    models = [
        (modeling.BertClassifier(config, 3), features),
        (modeling.BertTokenClassifier(config, 3), {**features, "word_positions": tf.constant([[1, 2], [0, 3]])}),
        (modeling.BertSpanLabeler(config), features),
        (modeling.BertMultipleChoice(config), {**choices, "choice_mask": tf.ones((2, 2), tf.int32)}),
    ]
    for model, inputs in models:
        shape = [*inputs["input_ids"].shape, config.hidden_size]
        plain = tf.nest.flatten(model(inputs, training=False))
        zero = tf.nest.flatten(model({**inputs, modeling.WORD_EMBEDDING_DELTA: tf.zeros(shape)}, training=False))
        delta = tf.random.stateless_normal(shape, seed=[1, 2])  # (not a constant: LayerNorm removes those)
        moved = tf.nest.flatten(model({**inputs, modeling.WORD_EMBEDDING_DELTA: delta}, training=False))
        for a, b, c in zip(plain, zero, moved):
            np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=model.name)
            assert not np.allclose(a.numpy(), c.numpy()), model.name
