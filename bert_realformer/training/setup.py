"""What a training run sets up before its driver, from its options alone: the config with the
variant asked for, the strategy, the checks that the batches and the vocabulary fit the model
(before any work), and the driver's options for this worker of the cluster.

    config = load_config("bert_config.json", 128, residual_attention="sum")
    strategy = StrategySpec("mirrored").make()
    check_batches_fit(config, 128, strategy.num_replicas_in_sync, {"train_batch_size": 32})
    options = for_worker(RunOptions(output_dir="out"), strategy, training=True)

The errors name options (`vocab_file`, `train_batch_size`), which the scripts print as their flags.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
from collections.abc import Mapping

from bert_realformer.cpu_kernels import slow_int8_warning, slow_precision_warning
from bert_realformer.cpus import on_cpus
from bert_realformer.errors import InputError
from bert_realformer.training.distribution import make_strategy
from bert_realformer.training.driver import RunOptions
from tokenization.reference import vocab_lines

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class StrategySpec:
    """The tf.distribute strategy a run asks for: `name` (`distribution.STRATEGIES`) and, for a
    TPU, where it is."""
    name: str = "one_device"
    tpu_name: str | None = None
    tpu_zone: str | None = None
    gcp_project: str | None = None
    master: str | None = None

    def make(self):
        """The strategy (make it before TensorFlow runs any op: multi-worker collectives need it)."""
        return make_strategy(self.name, self.tpu_name, self.tpu_zone, self.gcp_project, self.master)


def load_config(config_file: str, max_seq_length: int, layer_norm_type: str | None = None,
                residual_attention: str | None = None):
    """The config of `config_file` with the variant overrides given (None: the file's); checks
    `max_seq_length` against its position embeddings."""
    from bert_realformer.checkpoints.config_files import check_sequence_length, read_config
    config = read_config(config_file)
    overrides = {key: value for key, value in (("layer_norm_type", layer_norm_type),
                                                ("residual_attention", residual_attention)) if value is not None}
    config = config.replace(**overrides) if overrides else config
    check_sequence_length(max_seq_length, config.max_position_embeddings, config.position_offset, config_file)
    return config


TENSOR_INDEX_LIMIT = 2**31 - 1  # elements one tensor may hold: TensorFlow's kernels index with int32


def check_batches_fit(config, seq_length: int, replicas: int, batches: Mapping[str, int],
                      predictions_per_seq: int = 0) -> None:
    """An `InputError` for a batch of `batches` {option: size} whose largest activation on one
    replica (the attention scores [B, heads, S, S], the feed-forward's [B, S, intermediate] or the
    masked LM logits [B * predictions, vocab]) would hold more elements than a tensor can index:
    said up front with what fits, instead of a shape error deep in the graph."""
    per_example = {"attention scores": config.num_attention_heads * seq_length * seq_length,
                   "feed-forward activations": seq_length * config.intermediate_size,
                   "masked LM logits": predictions_per_seq * config.vocab_size}
    what, largest = max(per_example.items(), key=lambda item: item[1])
    fits = TENSOR_INDEX_LIMIT // largest * replicas
    for name, batch in batches.items():
        if batch > fits:
            raise InputError(
                f"{name}={batch} is too large for the device: one replica's {what} would hold "
                f"{-(-batch // replicas) * largest:,} values, more than the {TENSOR_INDEX_LIMIT:,} a tensor can "
                f"index; at most {fits:,} fit (gradient_accumulation_steps makes larger updates)",
                options=(name, "gradient_accumulation_steps"))


# --- the vocabulary against the model it feeds ---------------------------------------------------
# A token's id is its line number in the vocabulary (as the original reads it), so every line must
# index a row of the model's embedding table (`vocab_size` rows): a longer file, or one whose
# duplicate lines push later tokens past the table, would fail mid-training on a CPU and embed
# zeros silently on a GPU. A shorter file is legal (an extended model fine-tuned with its old
# vocabulary) but never produces the model's newer tokens: said in one warning line.

FINE_TUNING_TOKENS = ("[UNK]", "[CLS]", "[SEP]")
DUPLICATES_SHOWN = 3


def duplicates(tokens: list[str]) -> list[tuple[str, list[int]]]:
    """[(token, its line numbers (1-based))] of tokens on more than one line, in file order."""
    lines: dict[str, list[int]] = collections.defaultdict(list)
    for number, token in enumerate(tokens, 1):
        lines[token].append(number)
    return [(token, numbers) for token, numbers in lines.items() if len(numbers) > 1]


def check_tokenizer_vocabulary(vocab_file: str, tokenizer, vocab_size: int | None) -> None:
    """The same checks for a SentencePiece or BPE vocabulary (`tokenization.vocabularies`): its
    special tokens there, every id a row of the model's embedding table."""
    for token in (tokenizer.unk_token, tokenizer.cls_token, tokenizer.sep_token):
        if token not in tokenizer.vocab:
            raise InputError(f"vocab_file={vocab_file} has no {token} token; the fine-tuning scripts need "
                             f"{tokenizer.unk_token}, {tokenizer.cls_token} and {tokenizer.sep_token}",
                             options=("vocab_file",))
    largest = max(tokenizer.vocab.values())
    if vocab_size is not None and largest >= vocab_size:
        raise InputError(f"vocab_file={vocab_file} has ids up to {largest} but the model's vocab_size is {vocab_size} "
                         "(bert_config_file); use the vocabulary the checkpoint was trained with",
                         options=("vocab_file", "bert_config_file"))


def checked_tokenizer(vocab_file: str, do_lower_case: bool, vocab_size: int | None):
    """The tokenizer of `vocab_file`, of any kind (`tokenization.vocabularies`), its vocabulary
    checked against the model's `vocab_size` (`check_vocabulary` for WordPiece,
    `check_tokenizer_vocabulary` for SentencePiece and byte-level BPE)."""
    from tokenization import FullTokenizer
    from tokenization.vocabularies import tokenizer_for
    tokenizer = tokenizer_for(vocab_file, do_lower_case=do_lower_case)
    if isinstance(tokenizer, FullTokenizer):
        check_vocabulary(vocab_file, vocab_size)
    else:
        check_tokenizer_vocabulary(vocab_file, tokenizer, vocab_size)
    return tokenizer


def check_vocabulary(vocab_file: str, vocab_size: int | None,
                     needed: tuple[str, ...] = FINE_TUNING_TOKENS) -> list[str]:
    """An `InputError` naming `vocab_file` when it has more lines than `vocab_size` (with its
    first duplicate tokens and their lines, when duplicates are why), or lacks a token of
    `needed`; one warning when it has fewer. Returns its tokens by line."""
    tokens = vocab_lines(vocab_file)
    for token in needed:
        if token not in tokens:
            raise InputError(f"vocab_file={vocab_file} has no {token} line; a BERT vocabulary holds "
                             f"{', '.join(needed)} (each on a line of its own)", options=("vocab_file",))
    if vocab_size is None:
        return tokens
    if len(tokens) > vocab_size:
        repeated = duplicates(tokens)
        why = ""
        if repeated:
            shown = "; ".join(f"{token!r} on lines {', '.join(map(str, numbers))}"
                              for token, numbers in repeated[:DUPLICATES_SHOWN])
            more = f" and {len(repeated) - DUPLICATES_SHOWN} more" if len(repeated) > DUPLICATES_SHOWN else ""
            why = f"; {len(repeated)} tokens are on more than one line ({shown}{more})"
        raise InputError(f"vocab_file={vocab_file} has {len(tokens)} lines but the model's vocab_size is "
                         f"{vocab_size} (bert_config_file): ids from {vocab_size} on would index past its "
                         f"embedding table{why}; use the vocabulary the checkpoint was trained with",
                         options=("vocab_file", "bert_config_file"))
    if len(tokens) < vocab_size:
        logger.warning("--vocab_file=%s has %d lines but the model's vocab_size is %d: the model's last %d tokens "
                       "can never be produced from text (an extended model's vocabulary is the one made with it)",
                       vocab_file, len(tokens), vocab_size, vocab_size - len(tokens))
    return tokens


# --- this worker's options ----------------------------------------------------------------------

def is_chief(strategy) -> bool:
    """Whether this process is the cluster's chief: the `chief`, else worker 0 (and any process
    without a cluster)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    return resolver.task_type == "chief" or (resolver.task_type == "worker" and resolver.task_id == 0
                                             and "chief" not in resolver.cluster_spec().as_dict())


def for_worker(options: RunOptions, strategy, training: bool) -> RunOptions:
    """`options` for this worker of `strategy`: the chief writes into the output directory (and
    claims it when `training`); another worker keeps its training state in OUTPUT_DIR/worker_N.
    Warns of bf16 or fp16 on a CPU without instructions for it, and of int8 where it gains nothing."""
    cpus_alone = on_cpus(strategy)
    for warning in (slow_precision_warning(options.mixed_precision, cpus_alone),
                    slow_int8_warning(options.prediction_engine, cpus_alone)):
        if warning:
            logger.warning(warning)
    chief = is_chief(strategy)
    write_dir = None if chief else os.path.join(options.output_dir, f"worker_{strategy.cluster_resolver.task_id}")
    return dataclasses.replace(options, is_chief=chief, write_dir=write_dir, claim_output_dir=chief and training)
