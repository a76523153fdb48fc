"""The fine-tuning options beyond the original, their math against hand computations and Keras's
own implementations: focal loss, label smoothing and class weights (`tasks.classification.losses`),
layer-wise learning rates and re-initialised top layers (`finetuning.layerwise`); the stuck check's
chance loss under focal loss."""

import json
import math
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import modeling
from bert_realformer.errors import InputError
from bert_realformer.finetuning import layerwise
from bert_realformer.finetuning.stuck import StuckWatch
from bert_realformer.tasks.classification.losses import (
    ClassifierLoss,
    balanced_class_weights,
    read_class_weights,
)
from bert_realformer.training.optimization import AdamWeightDecay, Lamb

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "tests", "data", "bert_postln_tiny")
LOGITS = np.array([[2.0, 0.0, -1.0], [0.5, 0.5, 0.0], [-3.0, 4.0, 1.0]], np.float32)
LABELS = np.array([0, 2, 1])


def _softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _losses(loss):
    return loss.per_example(tf.constant(LOGITS), tf.constant(LABELS)).numpy()


# ------------------------------------------------------------------ losses
def test_cross_entropy_is_the_original_and_keras_sparse_cross_entropy():
    expected = -np.log(_softmax(LOGITS)[np.arange(3), LABELS])
    np.testing.assert_allclose(_losses(ClassifierLoss()), expected, rtol=1e-6)
    keras_values = keras.losses.sparse_categorical_crossentropy(LABELS, LOGITS, from_logits=True)
    np.testing.assert_allclose(_losses(ClassifierLoss()), keras.ops.convert_to_numpy(keras_values), rtol=1e-6)
    assert ClassifierLoss().is_original and not ClassifierLoss(label_smoothing=0.1).is_original


@pytest.mark.parametrize("gamma,smoothing", [(2.0, 0.0), (0.5, 0.0), (2.0, 0.1), (0.0, 0.2)])
def test_focal_loss_with_smoothing_by_hand_and_as_keras_computes_it(gamma, smoothing):
    """-sum_c t_c (1 - p_c)^gamma log p_c, t = (1 - e) onehot + e / C: by hand in NumPy, and
    Keras's CategoricalFocalCrossentropy (alpha 1) on the same targets."""
    p = _softmax(LOGITS.astype(np.float64))
    targets = np.eye(3)[LABELS] * (1 - smoothing) + smoothing / 3
    expected = -(targets * (1 - p) ** gamma * np.log(p)).sum(-1)
    got = _losses(ClassifierLoss("focal", gamma, smoothing))
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    theirs = keras.losses.CategoricalFocalCrossentropy(alpha=1.0, gamma=gamma, from_logits=True,
                                                       label_smoothing=smoothing, reduction=None)
    np.testing.assert_allclose(got, keras.ops.convert_to_numpy(theirs(np.eye(3)[LABELS], LOGITS)), rtol=1e-5)


def test_focal_loss_gradient_stays_finite_where_the_model_is_certain():
    logits = tf.constant([[80.0, 0.0], [0.0, 80.0]])
    with tf.GradientTape() as tape:
        tape.watch(logits)
        total = tf.reduce_sum(ClassifierLoss("focal", 0.5).per_example(logits, tf.constant([0, 1])))
    assert np.all(np.isfinite(tape.gradient(total, logits).numpy()))


@pytest.mark.parametrize("loss", [ClassifierLoss(), ClassifierLoss(label_smoothing=0.2),
                                  ClassifierLoss("focal", 2.0), ClassifierLoss("focal", 1.0, 0.1, (3.0, 0.5, 1.0))],
                         ids=["ce", "smoothed", "focal", "focal-smoothed-weighted"])
def test_a_model_that_learned_nothing_is_at_the_chance_loss(loss):
    """Uniform logits: every example's loss (and so the weighted mean) is `chance_loss`: ln 3
    for cross-entropy with or without smoothing, (2/3)^gamma ln 3 for focal loss."""
    values = loss.per_example(tf.zeros([4, 3]), tf.constant([0, 1, 2, 1])).numpy()
    np.testing.assert_allclose(values, loss.chance_loss(3), rtol=1e-6)
    assert loss.chance_loss(3) == pytest.approx(math.log(3) * ((2 / 3) ** loss.focal_gamma if loss.kind == "focal"
                                                               else 1))
    assert loss.chance_loss(1) is None


def test_class_weights_make_a_weighted_mean_over_the_whole_step():
    """Two replicas' (or micro-batches') shares add up to sum w_y l / sum w_y over all examples."""
    loss = ClassifierLoss(class_weights=(2.0, 0.5, 1.0))
    total = sum(float(loss.totals({"label_ids": tf.constant(part)})["examples"]) for part in (LABELS[:2], LABELS[2:]))
    shares = [float(loss.weighted_sum(tf.constant(z), tf.constant(y))) / total
              for z, y in ((LOGITS[:2], LABELS[:2]), (LOGITS[2:], LABELS[2:]))]
    per_example = -np.log(_softmax(LOGITS)[np.arange(3), LABELS])
    weights = np.array([2.0, 1.0, 0.5])  # the classes of labels 0, 2, 1
    assert total == pytest.approx(3.5)
    assert sum(shares) == pytest.approx(float((weights * per_example).sum() / weights.sum()), rel=1e-6)


def test_balanced_class_weights_are_sklearns():
    """N / (C n_c): 4 examples, 3 classes, counts 3, 1, 0."""
    assert balanced_class_weights([0, 0, 1, 0], 3) == pytest.approx((4 / 9, 4 / 3, 0.0))
    assert balanced_class_weights([0, 1, 2, 0, 1, 2], 3) == pytest.approx((1.0, 1.0, 1.0))


def test_a_class_weights_file_by_label_and_its_mistakes_named_by_line(tmp_path):
    labels = ["neg", "pos", "mixed"]
    path = tmp_path / "weights.tsv"
    path.write_text("pos\t2.5\n\nmixed\t0.5\nneg\t1\n", encoding="utf-8")
    assert read_class_weights(str(path), labels) == (1.0, 2.5, 0.5)
    for text, said in (("pos\t2.5\nneg 1\n", f"{path}:2: expected LABEL<TAB>WEIGHT with a weight > 0, got 'neg 1'"),
                       ("pos\t0\n", f"{path}:1: expected LABEL<TAB>WEIGHT with a weight > 0, got 'pos\\t0'"),
                       ("pos\tnan\n", f"{path}:1: expected LABEL<TAB>WEIGHT with a weight > 0, got 'pos\\tnan'"),
                       ("neutral\t1\n", f"{path}:1: 'neutral' is not a label of this task (neg, pos, mixed)"),
                       ("pos\t1\npos\t2\n", f"{path}:2: 'pos' is given a weight twice"),
                       ("pos\t1\n", f"{path}: no weight for the labels neg, mixed")):
        path.write_text(text, encoding="utf-8")
        with pytest.raises(InputError) as error:
            read_class_weights(str(path), labels)
        assert str(error.value) == said


def _verdict_at(level, chance):
    """The stuck check's verdict on a 100-step run (no warm-up) whose loss stays at `level`."""
    watch = StuckWatch(2, 0, 100, chance_loss=chance)
    for step in range(0, 100, 10):
        watch.observe_loss(step, step + 10, 10 * level)
    return watch.verdict()


def test_the_stuck_check_knows_focal_losss_chance_level():
    """A focal-loss run sitting at (1/2)^2 ln 2 = 0.1733 is stuck; at ln 2 it is not (far above
    what focal loss gives a model that learned nothing)."""
    chance = ClassifierLoss("focal", 2.0).chance_loss(2)
    assert _verdict_at(math.log(2), chance) is None
    assert "within 1% of 0.1733, the loss of a model that has learned nothing" in _verdict_at(chance, chance).reason
    assert "within 1% of ln 2 = 0.6931," in _verdict_at(math.log(2), None).reason


# ------------------------------------------------------------------ layer-wise
def _tiny(layer_norm_type="post"):
    with open(os.path.join(TINY, "bert_config.json")) as f:
        config = modeling.BertConfig.from_dict(json.load(f)).replace(layer_norm_type=layer_norm_type)
    model = modeling.BertClassifier(config, num_labels=2)
    model.build()
    return model


def test_depth_counts_from_the_head_down_to_the_embeddings():
    depths = {name: layerwise.depth(name, 3) for name in (
        "output_weights", "bert/pooler/dense/kernel", "bert/encoder/LayerNorm/gamma",
        "bert/encoder/layer_2/output/dense/bias", "bert/encoder/layer_1/attention/self/query/kernel",
        "bert/encoder/layer_0/output/LayerNorm/beta", "bert/embeddings/word_embeddings")}
    assert list(depths.values()) == [0, 0, 0, 1, 2, 3, 4]


def test_an_albert_group_learns_at_the_rate_of_its_highest_layer():
    """5 layers in 2 groups: layers 0-2 run group 0 (highest 2: depth 3), layers 3-4 group 1
    (depth 1); the embedding projection sits with the embeddings (depth 6)."""
    assert [layerwise.depth(name, 5, 2) for name in (
        "bert/encoder/transformer/group_1/inner_group_0/LayerNorm_1/beta",
        "bert/encoder/transformer/group_0/inner_group_0/attention_1/self/query/kernel",
        "bert/encoder/embedding_hidden_mapping_in/kernel", "bert/pooler/dense/bias")] == [1, 3, 6, 0]
    config = modeling.BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=5, num_attention_heads=2,
                                 intermediate_size=12, embedding_size=4, num_hidden_groups=2)
    assert [config.group_of_layer(i) for i in range(5)] == [0, 0, 0, 1, 1]
    model = modeling.BertClassifier(config, num_labels=2)
    model.build()
    with pytest.raises(ValueError, match="share 2 set"):
        layerwise.reinitialize_top_layers(model, 1, seed=7)


@pytest.mark.parametrize("layer_norm_type", ["post", "pre"])
def test_multipliers_follow_the_optimizers_variable_order(layer_norm_type):
    model = _tiny(layer_norm_type)
    multipliers = layerwise.learning_rate_multipliers(model, 0.5)
    names = {id(v): n for n, v in model.tf1_names()}
    by_name = {names[id(v)]: m for v, m in zip(model.trainable_variables, multipliers)}
    assert len(multipliers) == len(model.trainable_variables) == len(by_name)
    assert by_name["output_weights"] == by_name["bert/pooler/dense/kernel"] == 1.0
    assert by_name["bert/encoder/layer_2/intermediate/dense/kernel"] == 0.5
    assert by_name["bert/encoder/layer_0/attention/self/key/bias"] == 0.125
    assert by_name["bert/embeddings/position_embeddings"] == 0.0625
    if layer_norm_type == "pre":
        assert by_name["bert/encoder/LayerNorm/gamma"] == 1.0


@pytest.mark.parametrize("optimizer_class", [AdamWeightDecay, Lamb])
def test_a_multiplier_scales_the_learning_rate_of_its_variable_alone(optimizer_class):
    """Each variable moves as an optimizer of rate lr * multiplier alone would move it."""
    start = [np.array([1.0, -2.0], "float32"), np.array([0.5, 0.25], "float32")]
    grads = [tf.constant([0.3, -0.6]), tf.constant([2.0, -1.0])]

    def run(learning_rate, multipliers=None):
        variables = [keras.Variable(s, name=f"kernel_{i}") for i, s in enumerate(start)]
        optimizer = optimizer_class(learning_rate=learning_rate, weight_decay_rate=0.01,
                                    learning_rate_multipliers=multipliers)
        for _ in range(3):
            optimizer.apply_gradients(zip(grads, variables))
        return [v.numpy() for v in variables]

    together = run(0.1, [1.0, 0.25])
    np.testing.assert_allclose(together[0], run(0.1)[0], rtol=1e-6)
    np.testing.assert_allclose(together[1], run(0.025)[1], rtol=1e-6)
    with pytest.raises(ValueError, match="3 learning-rate multipliers for 2 variables"):
        run(0.1, [1.0, 1.0, 1.0])


def test_reinitialised_top_layers_start_as_fresh_layers_and_the_rest_is_kept():
    model = _tiny()
    before = {name: v.numpy().copy() for name, v in model.tf1_names()}
    chosen = layerwise.reinitialize_top_layers(model, 1, seed=7)
    after = {name: v.numpy() for name, v in model.tf1_names()}
    assert set(chosen) == {n for n in before if n.startswith(("bert/encoder/layer_2/", "bert/pooler/"))}
    for name in before:
        if name not in chosen:
            np.testing.assert_array_equal(after[name], before[name])
        elif name.endswith("gamma"):
            np.testing.assert_array_equal(after[name], 1.0)
        elif name.endswith(("beta", "bias")):
            np.testing.assert_array_equal(after[name], 0.0)
        else:  # a truncated normal of the config's initializer_range, 0.2: within 2 sigma, sigma about 0.88 of it
            values = after[name]
            assert not np.allclose(values, before[name]) and np.abs(values).max() <= 0.4
            assert 0.6 * 0.2 < values.std() < 1.1 * 0.2, name
    again = _tiny()
    layerwise.reinitialize_top_layers(again, 1, seed=7)
    for name, variable in again.tf1_names():
        if name in chosen:
            np.testing.assert_array_equal(variable.numpy(), after[name])
    with pytest.raises(ValueError, match="the model has 3 layers; cannot re-initialise the top 4"):
        layerwise.reinitialize_top_layers(model, 4, seed=7)


def test_a_regression_refuses_the_classifier_losses(tmp_path):
    from bert_realformer.finetuning.contract import TaskOptions
    from bert_realformer.tasks.classification.task import ClassificationOptions, ClassificationTask
    for options in ({"loss": "focal"}, {"label_smoothing": 0.1}, {"class_weights": "balanced"}, {"rdrop_alpha": 1.0}):
        task = ClassificationTask(TaskOptions(str(tmp_path), 16), ClassificationOptions("sts-b", ".", **options))
        task.label_list = None  # (as `read` leaves it for a regression)
        with pytest.raises(InputError, match="sts-b is a regression"):
            task.training_loss([])
