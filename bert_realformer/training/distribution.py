"""tf.distribute strategies by name: one_device, mirrored, multi_worker (TF_CONFIG), tpu."""

from bert_realformer.errors import InputError

STRATEGIES = ("one_device", "mirrored", "multi_worker", "tpu")


def make_strategy(name, tpu_name=None, tpu_zone=None, gcp_project=None, master=None):
    """Builds the strategy; for `tpu` the cluster comes from `tpu_name`/`master` (and zone,
    project). For `multi_worker` the cluster is described by the `TF_CONFIG` variable."""
    import tensorflow as tf
    if name == "one_device":
        gpus = tf.config.list_logical_devices("GPU")
        return tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else "/cpu:0")
    if name == "mirrored":
        return tf.distribute.MirroredStrategy()
    if name == "multi_worker":
        return tf.distribute.MultiWorkerMirroredStrategy()
    if name == "tpu":
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(
            tpu=tpu_name or master, zone=tpu_zone, project=gcp_project)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    raise InputError(f"--distribution_strategy={name}: expected one of {', '.join(STRATEGIES)}")


def set_mixed_precision(mode):
    """'none' | 'bf16' | 'fp16' -> the Keras dtype policy (fp16 also needs loss scaling)."""
    import keras
    policies = {"none": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"}
    if mode not in policies:
        raise InputError(f"--mixed_precision={mode}: expected none, bf16 or fp16")
    keras.config.set_dtype_policy(policies[mode])
