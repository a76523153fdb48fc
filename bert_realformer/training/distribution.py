"""tf.distribute strategies by name: one_device, mirrored, multi_worker (TF_CONFIG), tpu; the
mixed-precision policy; which worker of a cluster this is; the check that several workers resume
from one step; the input options of pipelines on CPUs."""

import contextlib
import types
from collections.abc import Iterator

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
    raise InputError(f"distribution_strategy={name}: expected one of {', '.join(STRATEGIES)}",
                     options=("distribution_strategy",))


def this_worker(strategy) -> tuple[int, int]:
    """(the number of workers, this worker's index) as `MultiWorkerMirroredStrategy` counts
    them: the chief first, then the workers by task id; (1, 0) for any other strategy or
    without a cluster."""
    import tensorflow as tf
    resolver = getattr(strategy, "cluster_resolver", None)
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy) or resolver is None \
            or not resolver.task_type:
        return 1, 0
    return cluster_index(resolver.cluster_spec().as_dict(), resolver.task_type, resolver.task_id)


def cluster_index(cluster: dict, task_type: str, task_id: int) -> tuple[int, int]:
    """(the number of workers in `cluster` {job: [address, ...]}, the index of the task
    `task_type`:`task_id` among them: the chief first, then the workers)."""
    chiefs = len(cluster.get("chief", []))
    return chiefs + len(cluster.get("worker", [])), task_id + (chiefs if task_type == "worker" else 0)


POLICIES = types.MappingProxyType({"none": "float32", "bf16": "mixed_bfloat16", "fp16": "mixed_float16"})


@contextlib.contextmanager
def dtype_policy(mode: str) -> Iterator[None]:
    """'none' | 'bf16' | 'fp16': the Keras dtype policy for the layers made inside (fp16 also
    needs loss scaling); the process's own policy is back in place after."""
    import keras
    if mode not in POLICIES:
        raise InputError(f"mixed precision {mode!r}: expected none, bf16 or fp16")
    previous = keras.config.dtype_policy()
    keras.config.set_dtype_policy(POLICIES[mode])
    try:
        yield
    finally:
        keras.config.set_dtype_policy(previous)


def check_workers_agree(strategy, step: int) -> None:
    """Several workers must resume from one step (each restores its own training state; one
    killed during a save keeps an older one): one all-gather of the steps; where they
    differ, every worker stops naming each one's step."""
    import tensorflow as tf

    from bert_realformer.checkpoints.training_states import TRAINING_STATE
    if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
        return

    @tf.function
    def gathered(value):
        return strategy.gather(strategy.run(lambda: tf.reshape(value, [1])), axis=0)

    steps = [int(s) for s in gathered(tf.constant(step, tf.int64)).numpy()]
    workers, _ = this_worker(strategy)
    per_worker = max(1, len(steps) // max(1, workers))  # (replicas are numbered worker by worker)
    by_worker = steps[::per_worker]
    if len(set(by_worker)) > 1:
        held = ", ".join(f"worker {i} at step {s}" for i, s in enumerate(by_worker))
        raise InputError(f"the workers would resume from training states of different steps ({held}): remove "
                         f"the training states after step {min(by_worker)} (each worker's "
                         f"{TRAINING_STATE}/ckpt-N with N > {min(by_worker)}, and name ckpt-"
                         f"{min(by_worker)} in its 'checkpoint' file) so that all resume from there, then run "
                         "the same command on every worker again")
