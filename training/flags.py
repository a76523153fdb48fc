"""Flags that run_pretraining.py and the fine-tuning scripts share: the original TPU flags and
our distribution, precision, optimizer, variant and PLD flags."""

from absl import flags


def define_shared_flags(pld=False):
    # The original's TPU flags.
    flags.DEFINE_bool("use_tpu", False, "Whether to use TPU (same as --distribution_strategy=tpu).")
    flags.DEFINE_string("tpu_name", None, "The Cloud TPU to use for training.")
    flags.DEFINE_string("tpu_zone", None, "GCE zone where the Cloud TPU is located in.")
    flags.DEFINE_string("gcp_project", None, "Project name for the Cloud TPU-enabled project.")
    flags.DEFINE_string("master", None, "TensorFlow master URL.")
    flags.DEFINE_integer("num_tpu_cores", 8, "Only used if use_tpu is True. Total number of TPU cores to use.")
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


def is_chief(strategy):
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    return resolver.task_type == "chief" or (resolver.task_type == "worker" and resolver.task_id == 0
                                             and "chief" not in resolver.cluster_spec().as_dict())
