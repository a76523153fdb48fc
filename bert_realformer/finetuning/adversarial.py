"""Adversarial training on the word embeddings: FGM (Miyato et al. 2017, "Adversarial Training
Methods for Semi-Supervised Text Classification") and PGD (Madry et al. 2018), as a training hook
(`AdversarialTraining`).

A task's loss function is wrapped (`Adversary.wrap`): the step's loss becomes the loss on the
input as given plus the loss with a perturbation r [B, ..., S, H] added to the word vectors
(`modeling.WORD_EMBEDDING_DELTA`), r held constant (no gradient flows through it). With g the
gradient of the clean loss with respect to the word vectors x, each example's
    FGM:  r = epsilon ||x|| g / ||g||
    PGD:  r_0 = 0; r_k = clip(r_{k-1} + (epsilon ||x|| / K) g_k / ||g_k||) for k = 1..K, g_k the
          gradient at r_{k-1}, clip scaling r back onto the ball ||r|| <= epsilon ||x||
with ||.|| the L2 norm over one example's whole sequence (||x|| over its real tokens). Epsilon
is thus a share of the example's own word vectors, the same for a tiny model and BERT-large
(an absolute epsilon of 1 would drown a tiny model's input and hardly touch a large model's).
Normalising per example makes r a
function of that example alone, so replicas and accumulated micro-batches (which scale the
loss by the whole step's example count) perturb exactly as one device with the whole batch. The
passes share the micro-batch's dropout masks (the same random stream): only r differs.
The metrics (the loss the user sees, what the stuck check reads) are the clean pass's.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from bert_realformer.training.hooks import HookRun, TrainingHook
from modeling import WORD_EMBEDDING_DELTA

KINDS = ("fgm", "pgd")
# An epsilon of this size or more measured to keep a small model at chance where it learns without
# adversarial training (BENCHMARKS.md, "Adversarial training's epsilon"): a run asking for it is warned.
STALLING_EPSILON = 0.003
# The clean loss is differentiated times this: a replica's share of the step's mean loss is
# small (1/batch of an example's), and under fp16 its gradient at the word vectors would
# underflow. Normalisation removes the factor again.
_GRADIENT_SCALE = 2.0 ** 12


def per_example_unit(g):
    """g [B, ...] divided by each example's L2 norm over its other axes (0 where that is 0 or
    not finite)."""
    norm = example_norms(g)
    unit = tf.math.divide_no_nan(g, norm)
    return tf.where(tf.math.is_finite(norm), unit, tf.zeros_like(unit))


def example_norms(x):
    """Each example's L2 norm [B, 1, ...] of x [B, ...] (over its other axes)."""
    return tf.sqrt(tf.reduce_sum(tf.square(x), axis=list(range(1, len(x.shape))), keepdims=True))


def onto_ball(r, radius):
    """r [B, ...] with each example's L2 norm cut to at most `radius` (a number, or [B, 1, ...])."""
    norm = example_norms(r)
    return r * tf.where(norm > radius, radius / tf.maximum(norm, radius), tf.ones_like(norm))


@dataclasses.dataclass(frozen=True)
class Adversary:
    """kind: "fgm" or "pgd"; epsilon: the perturbation's norm (its bound for PGD) as a share of
    the example's word vectors' norm; steps: PGD's K."""
    kind: str = "fgm"
    epsilon: float = 0.001
    steps: int = 3

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"unknown adversarial training {self.kind!r}; expected one of {', '.join(KINDS)}")

    def describe(self) -> str:
        steps = f", {self.steps} steps" if self.kind == "pgd" else ""
        return (f"adversarial training: {self.kind.upper()} on the word embeddings (epsilon {self.epsilon:g} of "
                f"their norm{steps})")

    def warning(self) -> str | None:
        """A line for a run whose epsilon is of a size measured to stop learning, else None."""
        if self.epsilon < STALLING_EPSILON:
            return None
        return (f"warning: --adversarial_epsilon={self.epsilon:g}: a perturbation of {STALLING_EPSILON:g} or more of "
                "the word vectors' norm kept small models at chance where they learned without it (BENCHMARKS.md, "
                "\"Adversarial training's epsilon\"); the default 0.001 learned on every seed measured")

    def stuck_hint(self) -> str:
        """What the stuck warning says first of a run with this adversary."""
        return (f"a smaller --adversarial_epsilon (now {self.epsilon:g}) or no --adversarial (a perturbation of "
                "this size can keep a model from leaving chance)")

    def perturbation(self, loss_at, clean_delta, clean_loss, tape, size=1.0):
        """r for the clean pass `clean_loss` (computed with `clean_delta`, zeros watched by
        `tape`); `loss_at(delta)` is the loss with another perturbation (PGD's later steps);
        `size`: what epsilon is a share of, each example's ||x|| [B, 1, ...] (or a number)."""
        scale = tf.constant(_GRADIENT_SCALE, clean_loss.dtype)
        g = tape.gradient(clean_loss, clean_delta, output_gradients=scale)
        radius = self.epsilon * size
        if self.kind == "fgm":
            return tf.stop_gradient(radius * per_example_unit(g))
        step_size = radius / self.steps
        r = onto_ball(step_size * per_example_unit(g), radius)
        for _ in range(self.steps - 1):
            with tf.GradientTape() as inner:
                inner.watch(r)
                loss = loss_at(r)
            g = inner.gradient(loss, r, output_gradients=scale)
            r = tf.stop_gradient(onto_ball(r + step_size * per_example_unit(g), radius))
        return tf.stop_gradient(r)

    def wrap(self, loss_fn):
        """The `LossFn` training on `loss_fn`'s loss plus its loss at the adversarial perturbation."""

        def adversarial_loss_fn(model, features, step, totals):
            shape = tf.concat([tf.shape(features["input_ids"]), [model.config.hidden_size]], axis=0)

            def loss_at(delta):
                return loss_fn(model, {**features, WORD_EMBEDDING_DELTA: delta}, step, totals)

            clean_delta = tf.zeros(shape, tf.float32)
            with tf.GradientTape() as tape:
                tape.watch(clean_delta)
                clean_loss, metrics = loss_at(clean_delta)
            r = self.perturbation(lambda delta: loss_at(delta)[0], clean_delta, clean_loss, tape,
                                  word_vector_norms(model, features))
            adversarial_loss, _ = loss_at(r)
            return clean_loss + adversarial_loss, metrics

        return adversarial_loss_fn


def word_vector_norms(model, features):
    """Each example's L2 norm [B, 1, ...] of its real tokens' word vectors (held constant)."""
    vectors = tf.gather(tf.convert_to_tensor(model.bert.get_embedding_table()), features["input_ids"])
    real = tf.cast(features["input_mask"], vectors.dtype)[..., None]
    return tf.stop_gradient(example_norms(vectors * real))


class AdversarialTraining(TrainingHook):
    """The hook that trains a run adversarially (`adversary.wrap` of the task's loss)."""

    def __init__(self, adversary: Adversary):
        self.adversary = adversary

    def wrap_loss(self, run: HookRun, loss_fn):
        run.say(self.adversary.describe(), *filter(None, [self.adversary.warning()]))
        return self.adversary.wrap(loss_fn)
