"""`AdamWeightDecay.apply` on 2 mirrored replicas, each handed the already-reduced gradient;
prints JSON {replica device: the variable's value} after one update.

Run by tests/test_optimization.py in a subprocess: MirroredStrategy's two logical CPU devices
must be configured before TensorFlow starts.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import tensorflow as tf  # noqa: E402

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

from bert_realformer.training.optimization import AdamWeightDecay  # noqa: E402

strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
    weight = tf.Variable([1.0, -2.0], name="kernel")
    # epsilon 1 makes the update depend on the gradient's size (Adam's ratio alone would not).
    optimizer = AdamWeightDecay(learning_rate=0.1, epsilon=1.0)
    optimizer.build([weight])


@tf.function
def step():
    strategy.run(lambda: optimizer.apply([tf.constant([0.3, -0.6])], [weight]))


step()
print(json.dumps({component.device: component.numpy().tolist() for component in weight.values}))
