"""The flags a run's training state depends on: recorded when the run starts, refused changed.

A run directory's training state, and the model it ends with, were made from particular token ids
(the vocabulary's content, the case), particular examples and schedule (the length texts were cut
to, how long ones were cut into windows and trained), and particular variables (the pretraining
heads alone or the whole model, with or without the next-sentence head). A command run again into
the same directory resumes from that state; with one of these flags changed it would go on
training another run's state on other data (or a shorter schedule would end it at once, a state
over other variables would look damaged), and prediction would feed the model other token ids. So a run
records the flags when it starts (`training_options.json`),

    {"state_depends_on": {"vocab_file": "sha256:6c1f…", "do_lower_case": true,
                          "max_seq_length": 128, "window_training": "separate"}}

and a later run into the directory that changes one is refused in one line naming the flag,
both values and the ways on, before it reads or writes anything. A run that only predicts is held
to the flags that give its token ids (`TOKEN_FLAGS`); the others may change there (a longer
`--max_seq_length` at prediction is a choice, not a mistake). A directory from before the record
is not checked.

The vocabulary is recorded by its content's SHA-256: a file moved or copied is the same
vocabulary, another one of the same size is not.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from bert_realformer import storage
from bert_realformer.checkpoints.training_states import TRAINING_STATE
from bert_realformer.errors import InputError
from bert_realformer.training import recorded_options
from bert_realformer.training.hooks import HookRun, TrainingHook

KEY = "state_depends_on"
VOCABULARY = "vocab_file"
TOKEN_FLAGS = (VOCABULARY, "do_lower_case")  # what prediction is held to as well


def values(flag_values: Mapping[str, object], vocab_file: str | None = None) -> dict[str, object]:
    """What a run records: `flag_values` ({flag name: value}) and, with `vocab_file`, the
    vocabulary's content digest."""
    recorded = dict(flag_values)
    if vocab_file:
        recorded[VOCABULARY] = "sha256:" + storage.file_digest(vocab_file)
    return recorded


def _holds_a_run(directory: str) -> bool:
    """Whether `directory` holds a training state or a trained model (a run that recorded its
    flags and was refused or killed before its first save holds neither: nothing to keep)."""
    return (storage.exists(os.path.join(directory, TRAINING_STATE, "checkpoint"))
            or bool(storage.glob(os.path.join(directory, "model.ckpt-*.index"))))


def _flag_text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _as_given(name: str, value: object) -> str:
    """`with max_seq_length=128`, `with no_nsp=true`, or `without doc_stride` (None)."""
    return f"without {name}" if value is None else f"with {name}={_flag_text(value)}"


def check_unchanged(directory: str, wanted: Mapping[str, object], training: bool,
                    vocab_file: str | None = None) -> None:
    """An `InputError` when the run recorded in `directory` depends on a flag of `wanted`
    (`values`) that this run changes; a run that does not train (`training` False) is held to
    `TOKEN_FLAGS` alone. `vocab_file`: the path the vocabulary was given as, for the message."""
    recorded = recorded_options.read(directory).get(KEY)
    if not isinstance(recorded, dict) or not _holds_a_run(directory):
        return
    record = os.path.join(directory, recorded_options.FILE_NAME)
    for name, value in wanted.items():
        if name not in recorded or recorded[name] == value or (not training and name not in TOKEN_FLAGS):
            continue
        if name == VOCABULARY:
            given = f"{VOCABULARY}={vocab_file}: " if vocab_file else ""
            raise InputError(f"{given}{directory} holds a run made with another vocabulary ({record} records "
                             f"{str(recorded[name])[:19]}…, this one is {str(value)[:19]}…); give the vocabulary it "
                             "was made with, or a new output_dir", options=(VOCABULARY, "output_dir"))
        this = f"{name} left out" if value is None else f"{name}={_flag_text(value)}"
        was = _as_given(name, recorded[name])
        raise InputError(f"{this}: {directory} holds a run made {was} ({record}); run again {was} to go on with it, "
                         "or give a new output_dir", options=(name, "output_dir"))


class StateDependencies(TrainingHook):
    """Records `wanted` (`values`) with a new run and refuses to resume a run that recorded other
    values (before its training state is read: a state over other variables is not damaged).
    The scripts check earlier (`check_unchanged`, before the data is read); this keeps the API's
    callers to the same rule."""

    def __init__(self, wanted: Mapping[str, object]):
        self.wanted = dict(wanted)

    def state_variables(self, run: HookRun, resumed_from: str | None) -> dict:
        if run.resuming:
            check_unchanged(run.write_dir, self.wanted, training=True)
        return {}

    def recorded_options(self, run: HookRun) -> dict:
        return {KEY: self.wanted}
