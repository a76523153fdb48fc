"""The TensorFlow train step the benchmarks share (ours and tf-models-official's venv alike)."""


def sgd_step(loss_fn, variables, xla, learning_rate=1e-4):
    """A `tf.function` (XLA when `xla`) that computes `loss_fn(*args)`, its gradient with
    respect to `variables`, applies plain SGD and returns the loss."""
    import tensorflow as tf

    @tf.function(jit_compile=xla)
    def step(*args):
        with tf.GradientTape() as tape:
            loss = loss_fn(*args)
        grads = tape.gradient(loss, variables)
        for v, g in zip(variables, grads):
            v.assign_sub(learning_rate * tf.convert_to_tensor(g))
        return loss

    return step


def encoder_output_loss(out):
    """The encoder benchmarks' loss: mean squared pooled output + mean sequence output."""
    import tensorflow as tf
    return tf.reduce_mean(tf.square(out["pooled_output"])) + tf.reduce_mean(out["sequence_output"])
