"""tf-models-official's BertEncoder train step (forward + backward of a pooled-output loss,
SGD update), run in bench/.venv-tfm. Prints `RESULT {json}`."""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from common import emit_result, time_steps  # noqa: E402
from tf_step import encoder_output_loss, sgd_step  # noqa: E402


def _tanh_gelu(x):
    """The original BERT's tanh-approximate GELU, as ours (tf-models' "gelu" is the exact erf one)."""
    import tensorflow as tf
    return tf.keras.activations.gelu(x, approximate=True)


def main():
    case = json.loads(sys.argv[1])
    import numpy as np
    import tensorflow as tf
    from official.nlp.modeling import networks
    shape = case["shape"]
    encoder = networks.BertEncoder(
        vocab_size=30522, hidden_size=shape["hidden_size"], num_layers=shape["num_hidden_layers"],
        num_attention_heads=shape["num_attention_heads"], inner_dim=shape["intermediate_size"],
        max_sequence_length=512, type_vocab_size=2, inner_activation=_tanh_gelu, dropout_rate=0.1,
        attention_dropout_rate=0.1)
    batch, seq = case["batch_size"], case["seq_length"]
    rng = np.random.RandomState(0)
    inputs = {"input_word_ids": tf.constant(rng.randint(0, 30522, (batch, seq)), tf.int32),
              "input_mask": tf.ones((batch, seq), tf.int32), "input_type_ids": tf.zeros((batch, seq), tf.int32)}
    encoder(inputs)

    def loss():
        out = encoder(inputs, training=True)
        if not isinstance(out, dict):  # the legacy encoder returns [sequence, pooled]
            out = {"sequence_output": out[0], "pooled_output": out[1]}
        return encoder_output_loss(out)

    step = sgd_step(loss, encoder.trainable_variables, case["xla"])
    emit_result(time_steps(step, case["steps"], batch * seq))


if __name__ == "__main__":
    main()
