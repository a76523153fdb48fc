"""Flags that run_pretraining.py and the fine-tuning scripts share: the original TPU flags and
our distribution, precision, optimizer, variant and PLD flags."""

import os

from absl import flags


def define_shared_flags(pld=False):
    # The original's TPU flags.
    flags.DEFINE_bool("use_tpu", False, "Whether to use TPU (same as --distribution_strategy=tpu).")
    flags.DEFINE_string("tpu_name", None, "The Cloud TPU to use for training.")
    flags.DEFINE_string("tpu_zone", None, "GCE zone where the Cloud TPU is located in.")
    flags.DEFINE_string("gcp_project", None, "Project name for the Cloud TPU-enabled project.")
    flags.DEFINE_string("master", None, "TensorFlow master URL.")
    flags.DEFINE_integer("num_tpu_cores", 8, "Only used if use_tpu is True. Total number of TPU cores to use.")
    flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save the model checkpoint.")
    flags.DEFINE_integer("iterations_per_loop", 1000, "How many steps to make in each estimator call.")
    # Ours.
    flags.DEFINE_enum("distribution_strategy", "one_device", ["one_device", "mirrored", "multi_worker", "tpu"],
                      "one_device, mirrored (all local GPUs), multi_worker (machines from TF_CONFIG), tpu.")
    flags.DEFINE_enum("mixed_precision", "none", ["none", "bf16", "fp16"], "Mixed precision; fp16 uses dynamic loss scaling.")
    flags.DEFINE_bool("use_xla", False, "Compile the forward and backward pass with XLA.")
    flags.DEFINE_enum("optimizer", "adamw", ["adamw", "lamb"], "adamw (the original's) or lamb.")
    flags.DEFINE_float("weight_decay", 0.01, "Weight decay (not on LayerNorm and bias weights).")
    flags.DEFINE_integer("gradient_accumulation_steps", 1, "Micro-batches of the train batch size per optimizer step.")
    flags.DEFINE_enum("layer_norm_type", None, ["post", "pre"], "Override the config's layer_norm_type.")
    flags.DEFINE_enum("residual_attention", None, ["none", "sum", "mean"], "Override the config's residual_attention (RealFormer).")
    flags.DEFINE_integer("keep_checkpoint_max", 5, "Training-state checkpoints to keep.")
    flags.DEFINE_integer("seed", 12345, "Random seed (initialisation, dropout, data order).")
    if pld:
        flags.DEFINE_bool("pld", False, "Progressive Layer Dropping during training.")
        flags.DEFINE_float("pld_theta", 0.5, "PLD: the final keep probability theta_bar.")
        flags.DEFINE_float("pld_gamma", 0.001, "PLD: how fast theta(t) decays towards theta_bar.")


def load_config(config_file, max_seq_length):
    """The config with the variant overrides applied; checks max_seq_length against it."""
    from cli import InputError
    import modeling
    FLAGS = flags.FLAGS
    config = modeling.BertConfig.from_json_file(config_file)
    overrides = {k: getattr(FLAGS, k) for k in ("layer_norm_type", "residual_attention")
                 if getattr(FLAGS, k) is not None}
    config = config.replace(**overrides) if overrides else config
    if max_seq_length > config.max_position_embeddings:
        raise InputError(f"--max_seq_length={max_seq_length} exceeds max_position_embeddings "
                         f"{config.max_position_embeddings} of {config_file}")
    return config


def strategy_from_flags():
    """The tf.distribute strategy the flags ask for (create it before any TF op runs)."""
    from training.distribution import make_strategy
    FLAGS = flags.FLAGS
    name = "tpu" if FLAGS.use_tpu else FLAGS.distribution_strategy
    return make_strategy(name, FLAGS.tpu_name, FLAGS.tpu_zone, FLAGS.gcp_project, FLAGS.master)


def run_options(strategy, output_dir, init_checkpoint):
    """The driver's `RunOptions` from the shared flags; non-chief workers keep their training
    state in OUTPUT_DIR/worker_N."""
    from training.driver import RunOptions
    FLAGS = flags.FLAGS
    chief = is_chief(strategy)
    write_dir = None if chief else os.path.join(output_dir, f"worker_{strategy.cluster_resolver.task_id}")
    return RunOptions(
        output_dir=output_dir, init_checkpoint=init_checkpoint, seed=FLAGS.seed,
        mixed_precision=FLAGS.mixed_precision, use_xla=FLAGS.use_xla, optimizer=FLAGS.optimizer,
        weight_decay=FLAGS.weight_decay, gradient_accumulation_steps=FLAGS.gradient_accumulation_steps,
        save_checkpoints_steps=FLAGS.save_checkpoints_steps, iterations_per_loop=FLAGS.iterations_per_loop,
        keep_checkpoint_max=FLAGS.keep_checkpoint_max, is_chief=chief, write_dir=write_dir)


def check_shared_flags():
    """One-line errors for shared flags out of range."""
    from cli import InputError
    FLAGS = flags.FLAGS
    for name in ("gradient_accumulation_steps", "save_checkpoints_steps", "iterations_per_loop",
                 "keep_checkpoint_max"):
        if getattr(FLAGS, name) < 1:
            raise InputError(f"--{name}={getattr(FLAGS, name)}: must be at least 1")


def is_chief(strategy):
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    return resolver.task_type == "chief" or (resolver.task_type == "worker" and resolver.task_id == 0
                                             and "chief" not in resolver.cluster_spec().as_dict())
