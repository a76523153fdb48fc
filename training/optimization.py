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
    _reduced = None

    def build(self, var_list):
        if self.built:
            return
        super().build(var_list)
        self._m, self._v = self.add_optimizer_variables(var_list, ["adam_m", "adam_v"])

    def apply_reduced(self, grads, variables, scale=None, has_gradient=None, apply_mask=None):
        """One update from gradients the caller already summed across replicas, so they are
        not all-reduced again.

        Args:
          grads: one gradient or None per variable.
          variables: the variables.
          scale: a float32 scalar every gradient is multiplied by (the clipping factor: the
            original clips the global gradient), or None.
          has_gradient: None, or one boolean scalar per variable: False leaves the variable
            and its slots as they are, weight decay included (a layer that Progressive Layer
            Dropping skipped gets an all-zero gradient); None gradients are skipped always,
            as the original skips variables without a gradient.
          apply_mask: None, or a boolean scalar (dynamic loss scaling): False changes nothing,
            no variable, no slot, not the step counter, so the learning-rate schedule and
            everything keyed on the step stay where they were.
        """
        keep = [i for i, g in enumerate(grads) if g is not None]
        masks = {}
        for i in keep:
            mask = has_gradient[i] if has_gradient is not None else None
            if apply_mask is not None:
                mask = apply_mask if mask is None else ops.logical_and(mask, apply_mask)
            masks[self._var_key(variables[i])] = mask
        self._reduced = {"scale": scale, "masks": masks}
        try:
            self.apply([grads[i] for i in keep], [variables[i] for i in keep])
        finally:
            self._reduced = None
        if apply_mask is not None:  # `apply` counted the step; take it back if it was skipped
            self.iterations.assign_sub(ops.cast(ops.logical_not(apply_mask), self.iterations.dtype))

    def _all_reduce_sum_gradients(self, grads_and_vars):
        if self._reduced is not None:
            return list(grads_and_vars)
        return super()._all_reduce_sum_gradients(grads_and_vars)

    def _decays(self, variable):
        return self.weight_decay_rate and not _excluded(variable, self.exclude_from_weight_decay_patterns)

    def _scale_and_mask(self, variable):
        """(gradient scale, update mask) for `variable` inside `apply_reduced`, else (1, None)."""
        if self._reduced is None:
            return 1.0, None
        scale = self._reduced["scale"]
        return (1.0 if scale is None else scale), self._reduced["masks"].get(self._var_key(variable))

    def _slots(self, variable):
        index = self._get_variable_index(variable)
        return self._m[index], self._v[index]

    def update_step(self, gradient, variable, learning_rate):
        scale, mask = self._scale_and_mask(variable)
        m, v = self._slots(variable)
        decay = self.weight_decay_rate if self._decays(variable) else 0.0
        dtype = variable.dtype
        # As tensors (a cast reads a variable's value): the compiled function takes values.
        new_m, new_v, new_w = _fused_adamw(
            *(ops.cast(x, dtype) for x in (gradient, m, v, variable, learning_rate, scale)),
            _as_mask(mask), self.beta_1, self.beta_2, self.epsilon, decay)
        self.assign(m, new_m)
        self.assign(v, new_v)
        self.assign(variable, new_w)

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
        scale, mask = self._scale_and_mask(variable)
        m, v = self._slots(variable)
        g = ops.cast(gradient, variable.dtype) * ops.cast(scale, variable.dtype)
        new_m = self.beta_1 * m + (1.0 - self.beta_1) * g
        new_v = self.beta_2 * v + (1.0 - self.beta_2) * ops.square(g)
        step = ops.cast(self.iterations + 1, variable.dtype)
        m_hat = new_m / (1.0 - ops.power(self.beta_1, step))
        v_hat = new_v / (1.0 - ops.power(self.beta_2, step))
        update = m_hat / (ops.sqrt(v_hat) + self.epsilon)
        ratio = 1.0
        if self._decays(variable):
            update = update + self.weight_decay_rate * variable
        if not _excluded(variable, self.exclude_from_weight_decay_patterns):
            w_norm = ops.sqrt(ops.sum(ops.square(variable)))
            u_norm = ops.sqrt(ops.sum(ops.square(update)))
            ratio = ops.where((w_norm > 0) & (u_norm > 0), w_norm / ops.maximum(u_norm, 1e-30), 1.0)
        new_w = variable - ops.cast(learning_rate, variable.dtype) * ratio * update
        for target, value in ((m, new_m), (v, new_v), (variable, new_w)):
            self.assign(target, value if mask is None else ops.where(mask, value, target))


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


def _as_mask(mask):
    """A boolean scalar tensor (True when there is no mask)."""
    return ops.convert_to_tensor(True) if mask is None else mask


def _adamw_math(g, m, v, w, learning_rate, scale, mask, beta_1, beta_2, epsilon, decay):
    """The original AdamW on one variable: (new m, new v, new w), all unchanged where not
    `mask`. The gradient is multiplied by `scale` first."""
    g = g * scale
    new_m = beta_1 * m + (1.0 - beta_1) * g
    new_v = beta_2 * v + (1.0 - beta_2) * ops.square(g)
    update = new_m / (ops.sqrt(new_v) + epsilon)
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
    return tf.function(fn, jit_compile=True)


_fused_adamw = _fuse(_adamw_math)


def create_optimizer(init_lr, num_train_steps, num_warmup_steps, optimizer="adamw",
                     weight_decay=0.01):
    """The original `create_optimizer` (schedule + AdamW with decay 0.01), or LAMB."""
    schedule = WarmupLinearDecay(init_lr, num_train_steps, num_warmup_steps)
    if optimizer == "adamw":
        return AdamWeightDecay(learning_rate=schedule, weight_decay_rate=weight_decay)
    if optimizer == "lamb":
        return Lamb(learning_rate=schedule, weight_decay_rate=weight_decay)
    raise ValueError(f"unknown optimizer {optimizer!r}; expected adamw or lamb")
