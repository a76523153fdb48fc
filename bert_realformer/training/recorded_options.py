"""The training options a run directory was started with: `WRITE_DIR/training_options.json`.

A resumed run keeps what it started with, whatever its flags now say: the optimizer's Adam bias
correction (a change mid-run would change every later update), whether it keeps moving averages
of its weights and their decay (the training state holds them or not), and the seed (data order,
dropout; after a restart of a stuck run, the seed it restarted with). The file also says how a fine-tuned
classifier reads its input (length, windows, truncation), so that a later conversion to a
SavedModel serves the texts as the run read them; and it lists a run's restarts, and the stuck
check's verdict where it warned instead (`stuck`, null otherwise).

    {"adam_bias_correction": true, "ema_decay": 0.0, "seed": 12346,
     "restarts": [{"seed": 12345, "step": 90, "reason": "..."}], "stuck": null,
     "classifier_input": {"max_seq_length": 128, "doc_stride": 64, "window_pooling": "max", ...}}

Each worker of a multi-worker run keeps its own file beside its own training state.
"""

import json
import os

from bert_realformer import storage
from bert_realformer.checkpoints.formats import RUN_OPTIONS_FILE
from bert_realformer.errors import InputError
from bert_realformer.text_files import read_text

FILE_NAME = RUN_OPTIONS_FILE


def read(directory: str) -> dict:
    """The recorded options of a run directory ({} when it records none); a file that is not
    a JSON object is an `InputError` naming it."""
    path = os.path.join(directory, FILE_NAME)
    if not storage.isfile(path):
        return {}
    try:
        options = json.loads(read_text(path))
    except ValueError as error:
        raise InputError(f"{path}: expected a JSON object: {error}") from None
    if not isinstance(options, dict):
        raise InputError(f"{path}: expected a JSON object, found {type(options).__name__}")
    return options


def update(directory: str, **values) -> dict:
    """Sets `values` in the directory's record (atomically, other keys kept); returns the record."""
    options = {**read(directory), **values}
    storage.makedirs(directory)
    storage.write_atomic(os.path.join(directory, FILE_NAME), json.dumps(options, indent=2, sort_keys=True) + "\n")
    return options


def resumed_seed(write_dir: str, seed: int) -> tuple[int, str | None]:
    """(the seed a run resuming in `write_dir` goes on with, a line when that is not `seed`): the
    seed recorded when it started or restarted (its data order and dropout go on as they began)."""
    record = read(write_dir)
    recorded = record.get("seed")
    if recorded is None or int(recorded) == seed:
        return seed, None
    how = "restarted" if record.get("restarts") else "started"
    return int(recorded), (f"resuming with --seed={recorded}, the seed this run {how} with; --seed={seed} applies "
                           "to new runs")


def resumed_bias_correction(write_dir: str, wanted: bool, optimizer: str) -> tuple[bool, str | None]:
    """(whether a run resuming in `write_dir` corrects Adam's moments, a line when that is not
    `wanted`): what it started with (a record without it started without, as every run did
    before the option)."""
    recorded = bool(read(write_dir).get("adam_bias_correction", False))
    if recorded == wanted or optimizer != "adamw":
        return recorded, None
    return recorded, (f"resuming with Adam bias correction {'on' if recorded else 'off'}, as this run started "
                      f"({os.path.join(write_dir, FILE_NAME)}); --adam_bias_correction={str(wanted).lower()} "
                      "applies to new runs")


def resumed_ema_decay(write_dir: str, wanted: float) -> tuple[float, str | None]:
    """(the decay of the weight averages a run resuming in `write_dir` keeps, 0 for none; a line
    when that is not `wanted`): what it started with (a record without it kept none)."""
    recorded = float(read(write_dir).get("ema_decay", 0.0))
    if recorded == wanted:
        return recorded, None
    kept = f"weight averages of decay {recorded:g}" if recorded else "no weight averages"
    return recorded, (f"resuming with {kept}, as this run started ({os.path.join(write_dir, FILE_NAME)}); "
                      f"an EMA decay of {wanted:g} applies to new runs")
