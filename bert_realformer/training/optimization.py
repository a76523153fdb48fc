"""The original BERT optimizer and learning-rate schedule, as Keras 3 optimizers that own
their update (`AdamWeightDecay.apply`).

`AdamWeightDecay` is the original `AdamWeightDecayOptimizer`:
    m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
    update = m / (sqrt(v) + eps) [+ weight_decay * w, except LayerNorm and bias weights]
    w -= lr * update
with no bias correction. With `bias_correction=True` (the fine-tuning scripts' default) the
moments are corrected as in Adam (Kingma and Ba) and `torch.optim.AdamW`, at step t = 1, 2, ...:
    update = (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) [+ weight_decay * w]
Without it the early steps are several times larger than the learning rate says (v starts at 0
and its estimate grows slowly: the step is (1 - b1^t) / sqrt(1 - b2^t) times the corrected one,
with the defaults about 3 times at step 1, 6 at step 10, 3 at step 100), which leaves some
fine-tuning seeds at chance (Mosbach et al. 2021, "On the Stability of Fine-tuning BERT").
`Lamb` (You et al. 2019) always corrects and scales each variable's step by the trust ratio
||w|| / ||update||. Gradients are clipped to global norm 1.0 by the training loop
(`clip_by_global_norm`), as the original `create_optimizer`.
The schedule: linear warmup from 0 over `num_warmup_steps`, then linear decay to 0 at
`num_train_steps` (the original's polynomial decay with power 1).
"""

import re

import keras
import tensorflow as tf
from keras import ops

EXCLUDE_FROM_WEIGHT_DECAY = ("LayerNorm", "layer_norm", "bias")


class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """lr(step) = init_lr * step / warmup while step < warmup, else
    init_lr * (1 - min(step, num_train_steps) / num_train_steps)."""

    def __init__(self, init_lr, num_train_steps, num_warmup_steps):
        self.init_lr = init_lr
        self.num_train_steps = num_train_steps
        self.num_warmup_steps = num_warmup_steps

    def __call__(self, step):
        step = ops.cast(step, "float32")
        decay_steps = float(max(self.num_train_steps, 1))
        decayed = self.init_lr * (1.0 - ops.minimum(step, decay_steps) / decay_steps)
        if not self.num_warmup_steps:
            return decayed
        warmup = self.init_lr * step / float(self.num_warmup_steps)
        return ops.where(step < float(self.num_warmup_steps), warmup, decayed)

    def get_config(self):
        return {"init_lr": self.init_lr, "num_train_steps": self.num_train_steps,
                "num_warmup_steps": self.num_warmup_steps}


def _excluded(variable, patterns):
    # A Keras variable has a path; the TensorFlow backend hands the optimizer its tf.Variable,
    # whose name is that path (plus ":0").
    name = getattr(variable, "path", None) or variable.name
    return any(re.search(p, name) is not None for p in patterns)


class AdamWeightDecay(keras.optimizers.Optimizer):
    """The original BERT AdamW (epsilon 1e-6; no bias correction unless `bias_correction`).

    The update is this class's own: `apply(gradients, variables, scale, has_gradient,
    apply_mask)` takes gradients the caller has already summed across replicas (the training
    loop all-reduces once, clips and unscales), and updates each variable and its two slots
    where the variable lives (`tf.distribute`'s `merge_call` and `extended.update`). Keras
    provides only what is public: the slot and step variables (`build`,
    `add_optimizer_variables`, `iterations`), the learning rate from the schedule, `assign`.
    Slots are found by position: `apply` takes the variables in the order `build` got them.
    """

    def __init__(self, learning_rate=0.001, weight_decay_rate=0.0, beta_1=0.9, beta_2=0.999,
                 epsilon=1e-6, exclude_from_weight_decay=EXCLUDE_FROM_WEIGHT_DECAY, bias_correction=False,
                 learning_rate_multipliers=None, name="AdamWeightDecay", **kwargs):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.bias_correction = bool(bias_correction)
        # One factor per variable, in the order `build` gets them (layer-wise rates); None: all 1.
        self.learning_rate_multipliers = None if learning_rate_multipliers is None else tuple(
            float(m) for m in learning_rate_multipliers)
        self.weight_decay_rate = weight_decay_rate
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.exclude_from_weight_decay_patterns = tuple(exclude_from_weight_decay or ())

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._m, self._v = self.add_optimizer_variables(var_list, ["adam_m", "adam_v"])
        self._excluded = [_excluded(v, self.exclude_from_weight_decay_patterns) for v in var_list]
        multipliers = self.learning_rate_multipliers
        if multipliers is not None and len(multipliers) != len(var_list):
            raise ValueError(f"{len(multipliers)} learning-rate multipliers for {len(var_list)} variables")
        self._multipliers = multipliers or (1.0,) * len(var_list)

    def apply(self, gradients, variables, scale=None, has_gradient=None, apply_mask=None):
        """One update, in a replica context or outside any strategy.

        Args:
          gradients: one gradient or None per variable, already summed across replicas (they
            are not all-reduced here).
          variables: the variables, in the order `build` got them.
          scale: a float32 scalar every gradient is multiplied by (the clipping factor: the
            original clips the global gradient), or None.
          has_gradient: None, or one boolean scalar per variable: False leaves the variable
            and its slots as they are, weight decay included (a layer that Progressive Layer
            Dropping skipped gets an all-zero gradient); None gradients are skipped always,
            as the original skips variables without a gradient.
          apply_mask: None, or a boolean scalar (a skipped step: an fp16 overflow, a
            non-finite gradient): False changes nothing, no variable, no slot, not the step
            counter, so the learning-rate schedule and everything keyed on the step stay.
        """
        if not self.built:
            self.build(list(variables))
        variables = [v.value if isinstance(v, keras.Variable) else v for v in variables]
        if len(variables) != len(self._m):
            raise ValueError(f"{len(variables)} variables, but the optimizer was built for {len(self._m)}")
        present = [i for i, g in enumerate(gradients) if g is not None]
        masks = []
        for i in present:
            mask = has_gradient[i] if has_gradient is not None else None
            if apply_mask is not None:
                mask = apply_mask if mask is None else ops.logical_and(mask, apply_mask)
            masks.append(ops.convert_to_tensor(True) if mask is None else mask)
        scale = ops.convert_to_tensor(1.0 if scale is None else scale, "float32")
        learning_rate = ops.convert_to_tensor(self.learning_rate, "float32")
        grads = [gradients[i] for i in present]

        def update_all(strategy, grads, masks, scale, learning_rate):  # cross-replica context
            for i, gradient, mask in zip(present, grads, masks):
                strategy.extended.update(variables[i], self._update_one, group=False,
                                         args=(i, gradient, mask, scale, learning_rate))

        context = tf.distribute.get_replica_context()
        if context is None:  # cross-replica context already
            update_all(tf.distribute.get_strategy(), grads, masks, scale, learning_rate)
        else:
            context.merge_call(update_all, args=(grads, masks, scale, learning_rate))
        step = 1 if apply_mask is None else ops.cast(apply_mask, self.iterations.dtype)
        self.iterations.assign_add(step)

    def apply_gradients(self, grads_and_vars):
        """Keras's entry point, for code outside the training loop (no replicas to reduce)."""
        grads, variables = zip(*grads_and_vars)
        self.apply(list(grads), list(variables))

    def _update_one(self, variable, index, gradient, mask, scale, learning_rate):
        """The update of the variable at `index` (on one device of a distributed variable)."""
        dtype = variable.dtype
        m, v = self._m[index], self._v[index]
        decay = 0.0 if self._excluded[index] else self.weight_decay_rate
        step = self.iterations + 1  # (the step this update makes: t in the bias correction)
        # As tensors (a cast reads a variable's value): the compiled function takes values.
        learning_rate = learning_rate * self._multipliers[index]
        new_m, new_v, new_w = _fused_adamw(
            *(ops.cast(x, dtype) for x in (gradient, m, v, variable, learning_rate, scale, step)),
            mask, self.beta_1, self.beta_2, self.epsilon, decay, self.bias_correction)
        self._assign_all((m, v, variable), (new_m, new_v, new_w))

    def _assign_all(self, targets, values):
        for target, value in zip(targets, values):
            self.assign(target, value)

    def update_step(self, gradient, variable, learning_rate):
        raise NotImplementedError("this optimizer updates through `apply` (see the class docstring)")

    def get_config(self):
        return {**super().get_config(), "weight_decay_rate": self.weight_decay_rate,
                "beta_1": self.beta_1, "beta_2": self.beta_2, "epsilon": self.epsilon,
                "exclude_from_weight_decay": self.exclude_from_weight_decay_patterns,
                "bias_correction": self.bias_correction,
                "learning_rate_multipliers": self.learning_rate_multipliers}


class Lamb(AdamWeightDecay):
    """LAMB: the same moments as AdamW, bias-corrected, plus weight decay, the step scaled per
    variable by the trust ratio ||w|| / ||update|| (1 where either norm is 0, and for excluded
    variables)."""

    def __init__(self, learning_rate=0.001, weight_decay_rate=0.0, name="Lamb", **kwargs):
        kwargs.pop("bias_correction", None)  # (always on)
        super().__init__(learning_rate=learning_rate, weight_decay_rate=weight_decay_rate,
                         bias_correction=True, name=name, **kwargs)

    def _update_one(self, variable, index, gradient, mask, scale, learning_rate):
        dtype = variable.dtype
        m, v = self._m[index], self._v[index]
        new_m, new_v = _adam_moments(ops.cast(gradient, dtype) * ops.cast(scale, dtype), m, v,
                                     self.beta_1, self.beta_2)
        step = ops.cast(self.iterations + 1, dtype)
        update = _adam_direction(new_m, new_v, step, self.beta_1, self.beta_2, self.epsilon, True)
        ratio = 1.0
        if self.weight_decay_rate and not self._excluded[index]:
            update = update + self.weight_decay_rate * variable
        if not self._excluded[index]:
            w_norm = ops.sqrt(ops.sum(ops.square(variable)))
            u_norm = ops.sqrt(ops.sum(ops.square(update)))
            ratio = ops.where((w_norm > 0) & (u_norm > 0), w_norm / ops.maximum(u_norm, 1e-30), 1.0)
        new_w = variable - ops.cast(learning_rate * self._multipliers[index], dtype) * ratio * update
        self._assign_all((m, v, variable), (ops.where(mask, value, target) for target, value in
                                            ((m, new_m), (v, new_v), (variable, new_w))))


def squared_norms(gradients):
    """float32 sum of squares of each gradient (None for None). (Left to the backend's own
    multi-threaded reductions: on a CPU, XLA's take twice as long.)"""
    return [None if g is None else ops.sum(ops.square(ops.cast(g, "float32"))) for g in gradients]


def global_norm_scale(squares, clip_norm=1.0):
    """(clip_norm / max(global_norm, clip_norm), global_norm) from `squared_norms`: the factor
    `tf.clip_by_global_norm` multiplies every gradient by."""
    present = [s for s in squares if s is not None]
    global_norm = ops.sqrt(ops.sum(ops.stack(present))) if present else ops.convert_to_tensor(0.0)
    return clip_norm / ops.maximum(global_norm, clip_norm), global_norm


def clip_by_global_norm(gradients, clip_norm=1.0):
    """`t * clip_norm / max(global_norm, clip_norm)` for each gradient (None kept), as
    `tf.clip_by_global_norm`. Returns (clipped, global_norm)."""
    scale, global_norm = global_norm_scale(squared_norms(gradients), clip_norm)
    return [None if g is None else g * ops.cast(scale, g.dtype) for g in gradients], global_norm


def _adam_moments(g, m, v, beta_1, beta_2):
    """Adam's moving averages of the gradient and its square: (new m, new v)."""
    return beta_1 * m + (1.0 - beta_1) * g, beta_2 * v + (1.0 - beta_2) * ops.square(g)


def _adam_direction(m, v, step, beta_1, beta_2, epsilon, bias_correction):
    """m / (sqrt(v) + eps), or with `bias_correction` the same of the moments divided by
    1 - beta^step (`step` counts from 1)."""
    if bias_correction:
        m = m / (1.0 - ops.power(beta_1, step))
        v = v / (1.0 - ops.power(beta_2, step))
    return m / (ops.sqrt(v) + epsilon)


def _adamw_math(g, m, v, w, learning_rate, scale, step, mask, beta_1, beta_2, epsilon, decay, bias_correction):
    """AdamW on one variable: (new m, new v, new w), all unchanged where not `mask`. The
    gradient is multiplied by `scale` first; `step` (from 1) only matters with `bias_correction`."""
    new_m, new_v = _adam_moments(g * scale, m, v, beta_1, beta_2)
    update = _adam_direction(new_m, new_v, step, beta_1, beta_2, epsilon, bias_correction)
    if decay:
        update = update + decay * w
    new_w = w - learning_rate * update
    return (ops.where(mask, new_m, m), ops.where(mask, new_v, v), ops.where(mask, new_w, w))


def _fuse(fn):
    """On the TensorFlow backend, `fn` compiled by XLA into one fused loop: on a CPU the
    update's dozen elementwise passes over each variable become one."""
    if keras.backend.backend() != "tensorflow":
        return fn
    import tensorflow as tf
    return tf.function(fn, jit_compile=True, autograph=False)


_fused_adamw = _fuse(_adamw_math)


def create_optimizer(init_lr, num_train_steps, num_warmup_steps, optimizer="adamw",
                     weight_decay=0.01, adam_bias_correction=False, learning_rate_multipliers=None):
    """The original `create_optimizer` (schedule + AdamW with decay 0.01), or LAMB;
    `adam_bias_correction` for AdamW (LAMB always corrects); `learning_rate_multipliers`: one
    factor of the scheduled rate per variable (`layerwise.learning_rate_multipliers`)."""
    schedule = WarmupLinearDecay(init_lr, num_train_steps, num_warmup_steps)
    if optimizer == "adamw":
        return AdamWeightDecay(learning_rate=schedule, weight_decay_rate=weight_decay,
                               bias_correction=adam_bias_correction,
                               learning_rate_multipliers=learning_rate_multipliers)
    if optimizer == "lamb":
        return Lamb(learning_rate=schedule, weight_decay_rate=weight_decay,
                    learning_rate_multipliers=learning_rate_multipliers)
    raise ValueError(f"unknown optimizer {optimizer!r}; expected adamw or lamb")
