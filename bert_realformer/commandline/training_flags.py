"""Flags that run_pretraining.py and the fine-tuning scripts share: the original TPU flags and
our distribution, precision, optimizer, variant and PLD flags."""

from absl import flags

from bert_realformer.commandline.help_text import FINETUNING, TRAINING, flag_group
from bert_realformer.commandline.runner import require_flags
from bert_realformer.errors import InputError

XLA_PREDICTION_DEFAULT = False


@flag_group(TRAINING)
def define_shared_flags(pld=False, adam_bias_correction=False):
    """`adam_bias_correction`: that flag's default (True for the fine-tuning scripts)."""
    # The original's TPU flags.
    flags.DEFINE_bool("use_tpu", False, "Whether to use TPU (same as --distribution_strategy=tpu).")
    flags.DEFINE_string("tpu_name", None, "The Cloud TPU to use for training.")
    flags.DEFINE_string("tpu_zone", None, "GCE zone where the Cloud TPU is located in.")
    flags.DEFINE_string("gcp_project", None, "Project name for the Cloud TPU-enabled project.")
    flags.DEFINE_string("master", None, "TensorFlow master URL.")
    flags.DEFINE_integer("num_tpu_cores", 8, "Accepted for the original's command lines and not read: the TPU "
                         "strategy uses every core of --tpu_name.")
    flags.DEFINE_integer("save_checkpoints_steps", 1000, "How often to save the model checkpoint.")
    flags.DEFINE_integer("iterations_per_loop", 1000, "The most steps to make on the device between two "
                         "returns to the host (progress line, summaries, stop check); loops are sized to "
                         "take about 10 s (growing to a minute), the first is one step.")
    # Ours.
    flags.DEFINE_enum("distribution_strategy", "one_device", ["one_device", "mirrored", "multi_worker", "tpu"],
                      "one_device, mirrored (all local GPUs), multi_worker (machines from TF_CONFIG), tpu.")
    flags.DEFINE_enum("mixed_precision", "none", ["none", "bf16", "fp16"], "Mixed precision; fp16 uses dynamic loss "
                      "scaling.")
    flags.DEFINE_bool("use_xla", False, "Compile the forward and backward pass with XLA.")
    flags.DEFINE_bool("xla_prediction", XLA_PREDICTION_DEFAULT, "Evaluate and predict with the model compiled by XLA "
                      "(one device; once per length bucket: sequences are padded to multiples of 16 up to 128, then "
                      "of 1/8 of the next power of two); false: TensorFlow's graph, op by op.")
    flags.DEFINE_bool("tflite_prediction", False, "Evaluate and predict on this host's CPUs with TensorFlow Lite "
                      "(XNNPACK kernels; the model converted with its weights whenever they changed, seconds to a "
                      "minute): faster than the graph on a CPU, most at batch 1; with --quantize=int8 its "
                      "dynamic-range int8. false: TensorFlow's graph.")
    flags.DEFINE_enum("optimizer", "adamw", ["adamw", "lamb"], "adamw (the original's) or lamb.")
    flags.DEFINE_bool("adam_bias_correction", adam_bias_correction, "AdamW: correct Adam's moment estimates for their "
                      "start at zero (Adam, torch.optim.AdamW); the original BERT optimizer does not (false), which "
                      "leaves some fine-tuning seeds at chance. A resumed run keeps what it started with. (LAMB "
                      "always corrects.)")
    flags.DEFINE_float("weight_decay", 0.01, "Weight decay (not on LayerNorm and bias weights).")
    flags.DEFINE_integer("gradient_accumulation_steps", 1, "Micro-batches of the train batch size per optimizer step.")
    flags.DEFINE_enum("layer_norm_type", None, ["post", "pre"], "Override the config's layer_norm_type.")
    flags.DEFINE_enum("residual_attention", None, ["none", "sum", "mean"], "Override the config's residual_attention "
                      "(RealFormer).")
    flags.DEFINE_integer("keep_checkpoint_max", 5, "Training-state checkpoints to keep.")
    flags.DEFINE_integer("seed", 12345, "Random seed (initialisation, dropout, data order).")
    if pld:
        flags.DEFINE_bool("pld", False, "Progressive Layer Dropping during training.")
        flags.DEFINE_float("pld_theta", 0.5, "PLD: the final keep probability theta_bar.")
        flags.DEFINE_float("pld_gamma", 0.001, "PLD: how fast theta(t) decays towards theta_bar.")


def define_finetuning_flags(task_help, task_default=None, data_help=None, train_batch_size=32,
                            learning_rate=5e-5, max_seq_length_help=None):
    """The original run_classifier.py's flags, which the fine-tuning scripts share, and the
    shared training flags."""
    flags.DEFINE_string("data_dir", None, data_help or "The input data dir. Should contain the .tsv files "
                        "(or other data files) for the task.")
    define_model_file_flags()
    flags.DEFINE_string("task_name", task_default, task_help)
    flags.DEFINE_string("output_dir", None, "The output directory where the model checkpoints will be written.")
    flags.DEFINE_string("init_checkpoint", None, "Initial checkpoint (usually from a pre-trained BERT model).")
    define_foreign_vocab_flag()
    flags.DEFINE_bool("do_lower_case", True, "Whether to lower case the input text. Should be True for uncased "
                      "models and False for cased models.")
    flags.DEFINE_integer("max_seq_length", 128, max_seq_length_help or "The maximum total input sequence "
                         "length after WordPiece tokenization.")
    flags.DEFINE_bool("do_train", False, "Whether to run training.")
    flags.DEFINE_bool("do_eval", False, "Whether to run eval on the dev set.")
    flags.DEFINE_bool("do_predict", False, "Whether to run the model in inference mode on the test set.")
    flags.DEFINE_integer("train_batch_size", train_batch_size, "Total batch size for training.")
    flags.DEFINE_integer("eval_batch_size", 8, "Total batch size for eval.")
    flags.DEFINE_integer("predict_batch_size", 8, "Total batch size for predict.")
    flags.DEFINE_float("learning_rate", learning_rate, "The initial learning rate for Adam.")
    flags.DEFINE_float("num_train_epochs", 3.0, "Total number of training epochs to perform.")
    flags.DEFINE_float("warmup_proportion", 0.1, "Proportion of training to perform linear learning rate "
                       "warmup for.")
    define_order_and_padding_flags()
    define_shared_flags(adam_bias_correction=True)
    define_monitoring_flags()
    define_layerwise_flags()
    require_flags("data_dir", "output_dir", *(() if task_default else ("task_name",)))


def define_model_file_flags(vocabulary: bool = True):
    """The original's --bert_config_file and --vocab_file, here defaulting to the checkpoint's own
    (`model_files.complete_model_files`)."""
    flags.DEFINE_string("bert_config_file", None, "The config json file corresponding to the pre-trained BERT model "
                        "(default: the one beside --init_checkpoint: bert_config.json, or a Hugging Face or "
                        "KerasHub config.json).")
    if vocabulary:
        flags.DEFINE_string("vocab_file", None, "The vocabulary file that the BERT model was trained on (default: "
                            "the one beside --init_checkpoint: vocab.txt, spiece.model or vocab.json).")


def define_foreign_vocab_flag():
    """Every fine-tuning script's way past `training.setup.check_vocabulary_belongs`."""
    flags.DEFINE_bool("allow_foreign_vocab", False, "Train with a --vocab_file other than the vocab.txt beside "
                      "--init_checkpoint (refused otherwise: each id would mean another token than the model learnt).")


@flag_group(FINETUNING)
def define_monitoring_flags():
    flags.DEFINE_integer("eval_every_steps", 0, "With --do_train: evaluate on the dev set (what --do_eval reads) "
                         "every N steps and at the end, into OUTPUT_DIR/eval_history.jsonl and TensorBoard, keeping "
                         "the best checkpoint in OUTPUT_DIR/best/ (--keep_best_by). 0: no evaluation during training.",
                         lower_bound=0)
    flags.DEFINE_string("keep_best_by", None, "With --eval_every_steps: the metric that picks the best checkpoint "
                        "(default: the task's main metric, e.g. eval_accuracy or f1); a loss (`loss`, `eval_loss`) "
                        "is minimised, any other metric maximised.")
    flags.DEFINE_integer("early_stopping_patience", 0, "With --eval_every_steps: stop training after K evaluations in "
                         "a row without a better --keep_best_by. 0: never.", lower_bound=0)
    flags.DEFINE_bool("use_best_checkpoint", True, "--do_eval, --do_predict and --export_dir use OUTPUT_DIR/best/ when "
                      "the run kept one (false: the weights training ended with).")
    flags.DEFINE_enum("on_stuck", "warn", ["warn", "restart"],
                      "A run whose training loss stays at ln K (K classes: it learns nothing), or whose every "
                      "evaluation gives one class, over 40% of the steps after warm-up: warn (one line), or restart "
                      "from the initial checkpoint with the next --seed, at most --max_restarts times (a run of "
                      "several workers restarts on the loss alone, which every worker sees).")
    flags.DEFINE_integer("max_restarts", 3, "--on_stuck=restart: restarts at most.", lower_bound=0)
    flags.DEFINE_float("restart_deadline", 0, "--on_stuck=restart: restart only when the run, started again at its "
                       "pace so far, would end by this time (Unix seconds, e.g. `date -d 18:00 +%s`); later, warn and "
                       "go on. 0: no limit. One machine only (a multi-worker run refuses it). run_study.py "
                       "--time_budget_minutes gives it to each restarting task run.")


@flag_group(FINETUNING)
def define_layerwise_flags():
    flags.DEFINE_float("layerwise_lr_decay", 1.0, "Layer-wise learning rates: the head and pooler at "
                       "--learning_rate, the top encoder layer at F times it, each layer below F times the one above, "
                       "the embeddings lowest (layer i of L at F^(L-i), the embeddings at F^(L+1)). 1: one rate for "
                       "all, as the original.")
    flags.DEFINE_integer("reinit_top_layers", 0, "Re-initialise the top N encoder layers and the pooler with the "
                         "config's initializer before training (the pretrained weights of the layers nearest the "
                         "pretraining objective replaced); 0: none, as the original.")
    flags.DEFINE_float("ema_decay", 0.0, "Keep exponential moving averages of the weights (each step: average = D * "
                       "average + (1 - D) * weight) and use them for evaluation during training, the best checkpoint, "
                       "model.ckpt-N, --do_eval, --do_predict and the export; training steps the weights themselves. "
                       "0: none, as the original.")
    flags.DEFINE_enum("adversarial", None, ["fgm", "pgd"], "Adversarial training on the word embeddings: each step "
                      "also trains on the loss with the word vectors perturbed against it: fgm (one step along the "
                      "gradient, of norm --adversarial_epsilon times the example's word vectors' norm) or pgd "
                      "(--adversarial_steps steps of epsilon/steps, kept within epsilon). None: as the original.")
    flags.DEFINE_float("adversarial_epsilon", 0.001, "--adversarial: the perturbation's L2 norm over one example as a "
                       "share of its word vectors' norm (PGD: its bound). 0.003 and more kept small models at chance "
                       "where they learned without it; such a value is warned of.")
    flags.DEFINE_integer("adversarial_steps", 3, "--adversarial=pgd: the steps that build the perturbation.")
    flags.DEFINE_integer("lora_rank", 0, "Low-rank adaptation: rank-R factors on the --lora_targets dense layers of "
                         "every encoder layer, which train with the task's head while every other encoder weight "
                         "stays frozen; model.ckpt-N, best/ and the export hold the merged kernels. 0: every weight "
                         "trains, as the original.")
    flags.DEFINE_float("lora_alpha", 0, "--lora_rank: the factors' product is scaled by ALPHA / R. 0: R (a scale "
                       "of 1).")
    flags.DEFINE_list("lora_targets", ["query", "value"], "--lora_rank: the dense layers of each encoder layer that "
                      "get factors, among query, key, value, attention_output, intermediate, output.")


@flag_group(FINETUNING)
def define_order_and_padding_flags():
    """The training order and the padding of evaluation batches (every fine-tuning script)."""
    flags.DEFINE_integer("shuffle_buffer_size", 0, "Training order. 0: every epoch a new permutation of the whole "
                         "training set (a file sorted by label trains as well as a shuffled one); N: the original's "
                         "shuffle through a buffer of N examples (the original used 100).", lower_bound=0)
    flags.DEFINE_bool("dynamic_padding", True, "Evaluation and prediction: pad each batch to its longest sequence "
                      "(rounded up to a multiple of 8) instead of --max_seq_length; the outputs are the same.")
    flags.DEFINE_enum("quantize", "none", ["none", "int8"], "int8: evaluation, prediction and the export run the "
                      "Transformer blocks' dense layers in 8 bits (weights per tensor, inputs per batch as they come; "
                      "oneDNN's kernels on a CPU; its speed and accuracy: BENCHMARKS.md); "
                      "training stays in float. none: float throughout, as the original.")


def check_finetuning_flags(min_seq_length, sequence, other_modes=()):
    """One-line errors for the fine-tuning flags: required ones, files, modes, ranges.
    `sequence` names what must fit in `min_seq_length` (for the message); `other_modes` are
    flags besides --do_train/--do_eval/--do_predict that give a run something to do."""
    from bert_realformer import storage
    from bert_realformer.commandline.model_files import complete_model_files
    FLAGS = flags.FLAGS
    modes = ("do_train", "do_eval", "do_predict", *other_modes)
    if not any(getattr(FLAGS, name) for name in modes):
        raise InputError(f"at least one of {', '.join('--' + m for m in modes)} is needed")
    complete_model_files()
    if not storage.isdir(FLAGS.data_dir):
        raise InputError(f"--data_dir={FLAGS.data_dir}: no such directory")
    storage.check_writable_dir(FLAGS.output_dir, "output_dir")
    if FLAGS.max_seq_length < min_seq_length:
        raise InputError(f"--max_seq_length={FLAGS.max_seq_length}: too small for {sequence}")


def strategy_spec():
    """The tf.distribute strategy the flags ask for (`setup.StrategySpec`)."""
    from bert_realformer.training.setup import StrategySpec
    FLAGS = flags.FLAGS
    name = "tpu" if FLAGS.use_tpu else FLAGS.distribution_strategy
    return StrategySpec(name, FLAGS.tpu_name, FLAGS.tpu_zone, FLAGS.gcp_project, FLAGS.master)


def run_options(output_dir, init_checkpoint):
    """The driver's `RunOptions` from the shared flags (`setup.for_worker` completes them for a
    worker of the run's strategy)."""
    from bert_realformer.inference.engines import engine_for
    from bert_realformer.training.driver import RunOptions
    FLAGS = flags.FLAGS
    finetuning = "on_stuck" in FLAGS  # (the fine-tuning scripts' monitoring flags)
    return RunOptions(
        output_dir=output_dir, init_checkpoint=init_checkpoint, seed=FLAGS.seed,
        mixed_precision=FLAGS.mixed_precision, use_xla=FLAGS.use_xla,
        prediction_engine=engine_for(FLAGS.xla_prediction, FLAGS.quantize if finetuning else "none",
                                     FLAGS.tflite_prediction),
        optimizer=FLAGS.optimizer,
        weight_decay=FLAGS.weight_decay, adam_bias_correction=FLAGS.adam_bias_correction,
        gradient_accumulation_steps=FLAGS.gradient_accumulation_steps,
        save_checkpoints_steps=FLAGS.save_checkpoints_steps, iterations_per_loop=FLAGS.iterations_per_loop,
        keep_checkpoint_max=FLAGS.keep_checkpoint_max, seed_globally=True,
        **({"keep_recorded_seed": FLAGS.do_train} if finetuning else {}))


def adversary_from_flags():
    """The `Adversary` --adversarial asks for (None: none)."""
    FLAGS = flags.FLAGS
    if FLAGS.adversarial is None:
        for name in ("adversarial_epsilon", "adversarial_steps"):
            if FLAGS[name].present:
                raise InputError(f"--{name}={FLAGS[name].value} is adversarial training's: it needs "
                                 "--adversarial=fgm or pgd")
        return None
    if FLAGS.adversarial == "fgm" and FLAGS["adversarial_steps"].present:
        raise InputError(f"--adversarial_steps={FLAGS.adversarial_steps} is PGD's (FGM takes one step): it needs "
                         "--adversarial=pgd")
    from bert_realformer.finetuning.adversarial import Adversary
    return Adversary(FLAGS.adversarial, FLAGS.adversarial_epsilon, FLAGS.adversarial_steps)
