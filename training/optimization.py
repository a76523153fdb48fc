"""The original BERT optimizer and learning-rate schedule, as Keras 3 optimizers.

`AdamWeightDecay` is the original `AdamWeightDecayOptimizer`:
    m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
    update = m / (sqrt(v) + eps) [+ weight_decay * w, except LayerNorm and bias weights]
    w -= lr * update
with no bias correction. `Lamb` (You et al. 2019) adds bias correction and scales each
variable's step by the trust ratio ||w|| / ||update||. Gradients are clipped to global norm 1.0
by the training loop (`clip_by_global_norm`), as the original `create_optimizer`.
The schedule: linear warmup from 0 over `num_warmup_steps`, then linear decay to 0 at
`num_train_steps` (the original's polynomial decay with power 1).
"""

import re

import keras
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
    """The original BERT AdamW (no bias correction, epsilon 1e-6)."""

    def __init__(self, learning_rate=0.001, weight_decay_rate=0.0, beta_1=0.9, beta_2=0.999,
                 epsilon=1e-6, exclude_from_weight_decay=EXCLUDE_FROM_WEIGHT_DECAY,
                 name="AdamWeightDecay", **kwargs):
        super().__init__(learning_rate=learning_rate, name=name, **kwargs)
        self.weight_decay_rate = weight_decay_rate
        self.beta_1 = beta_1
        self.beta_2 = beta_2
        self.epsilon = epsilon
        self.exclude_from_weight_decay_patterns = tuple(exclude_from_weight_decay or ())

    # Set only for the duration of `apply_reduced` (see there).
    _gradients_are_reduced = False
    _apply_mask = None

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._m, self._v = self.add_optimizer_variables(var_list, ["adam_m", "adam_v"])

    def apply_reduced(self, grads, variables, apply_mask=None):
        """One update from gradients the caller already summed across replicas (and clipped:
        the original clips the global gradient), so they are not all-reduced again.

        A variable whose gradient is None, or zero everywhere (a layer Progressive Layer
        Dropping skipped), keeps its value and slots, weight decay included, as the original
        skips variables without a gradient. `apply_mask` (a boolean scalar, for dynamic loss
        scaling) False changes nothing: no variable, no slot, not the step counter, so the
        learning-rate schedule does not move.
        """
        pairs = [(g, v) for g, v in zip(grads, variables) if g is not None]
        self._gradients_are_reduced, self._apply_mask = True, apply_mask
        try:
            self.apply([g for g, _ in pairs], [v for _, v in pairs])
        finally:
            self._gradients_are_reduced, self._apply_mask = False, None
        if apply_mask is not None:  # `apply` counted the step; take it back if it was skipped
            self.iterations.assign_sub(ops.cast(ops.logical_not(apply_mask), self.iterations.dtype))

    def _all_reduce_sum_gradients(self, grads_and_vars):
        if self._gradients_are_reduced:
            return list(grads_and_vars)
        return super()._all_reduce_sum_gradients(grads_and_vars)

    def _decays(self, variable):
        return self.weight_decay_rate and not _excluded(variable, self.exclude_from_weight_decay_patterns)

    def _update_mask(self, gradient):
        """Whether to update a variable with this gradient: None (update) outside
        `apply_reduced`; inside, the gradient is not all zero and the step is not skipped."""
        if not self._gradients_are_reduced:
            return None
        mask = ops.any(ops.not_equal(gradient, 0))
        if self._apply_mask is not None:
            mask = ops.logical_and(mask, self._apply_mask)
        return mask

    def _masked_assign(self, variable, value, mask):
        if mask is not None:
            value = ops.where(mask, value, variable)
        self.assign(variable, value)

    def _adam_update(self, gradient, variable, mask):
        """Updates and returns the moments (m, v) of `variable`."""
        index = self._get_variable_index(variable)
        m, v = self._m[index], self._v[index]
        g = ops.cast(gradient, variable.dtype)
        new_m = self.beta_1 * m + (1.0 - self.beta_1) * g
        new_v = self.beta_2 * v + (1.0 - self.beta_2) * ops.square(g)
        self._masked_assign(m, new_m, mask)
        self._masked_assign(v, new_v, mask)
        return new_m, new_v

    def update_step(self, gradient, variable, learning_rate):
        mask = self._update_mask(gradient)
        m, v = self._adam_update(gradient, variable, mask)
        update = m / (ops.sqrt(v) + self.epsilon)
        if self._decays(variable):
            update = update + self.weight_decay_rate * variable
        self._masked_assign(variable, variable - ops.cast(learning_rate, variable.dtype) * update, mask)

    def get_config(self):
        return {**super().get_config(), "weight_decay_rate": self.weight_decay_rate,
                "beta_1": self.beta_1, "beta_2": self.beta_2, "epsilon": self.epsilon,
                "exclude_from_weight_decay": self.exclude_from_weight_decay_patterns}


class Lamb(AdamWeightDecay):
    """LAMB: bias-corrected Adam direction plus weight decay, scaled per variable by the trust
    ratio ||w|| / ||update|| (1 where either norm is 0, and for excluded variables)."""

    def __init__(self, learning_rate=0.001, weight_decay_rate=0.0, name="Lamb", **kwargs):
        super().__init__(learning_rate=learning_rate, weight_decay_rate=weight_decay_rate,
                         name=name, **kwargs)

    def update_step(self, gradient, variable, learning_rate):
        mask = self._update_mask(gradient)
        m, v = self._adam_update(gradient, variable, mask)
        step = ops.cast(self.iterations + 1, variable.dtype)
        m_hat = m / (1.0 - ops.power(self.beta_1, step))
        v_hat = v / (1.0 - ops.power(self.beta_2, step))
        update = m_hat / (ops.sqrt(v_hat) + self.epsilon)
        ratio = 1.0
        if self._decays(variable):
            update = update + self.weight_decay_rate * variable
        if not _excluded(variable, self.exclude_from_weight_decay_patterns):
            w_norm = ops.sqrt(ops.sum(ops.square(variable)))
            u_norm = ops.sqrt(ops.sum(ops.square(update)))
            ratio = ops.where((w_norm > 0) & (u_norm > 0), w_norm / ops.maximum(u_norm, 1e-30), 1.0)
        self._masked_assign(variable, variable - ops.cast(learning_rate, variable.dtype) * ratio * update,
                            mask)


def clip_by_global_norm(gradients, clip_norm=1.0):
    """`t * clip_norm / max(global_norm, clip_norm)` for each gradient (None kept), as
    `tf.clip_by_global_norm`. Returns (clipped, global_norm)."""
    squares = [ops.sum(ops.square(ops.cast(g, "float32"))) for g in gradients if g is not None]
    global_norm = ops.sqrt(ops.sum(ops.stack(squares))) if squares else ops.convert_to_tensor(0.0)
    scale = clip_norm / ops.maximum(global_norm, clip_norm)
    return [None if g is None else g * ops.cast(scale, g.dtype) for g in gradients], global_norm


def create_optimizer(init_lr, num_train_steps, num_warmup_steps, optimizer="adamw",
                     weight_decay=0.01):
    """The original `create_optimizer` (schedule + AdamW with decay 0.01), or LAMB."""
    schedule = WarmupLinearDecay(init_lr, num_train_steps, num_warmup_steps)
    if optimizer == "adamw":
        return AdamWeightDecay(learning_rate=schedule, weight_decay_rate=weight_decay)
    if optimizer == "lamb":
        return Lamb(learning_rate=schedule, weight_decay_rate=weight_decay)
    raise ValueError(f"unknown optimizer {optimizer!r}; expected adamw or lamb")
