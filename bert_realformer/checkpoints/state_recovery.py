"""The training state a run resumes from, when `training_state/` cannot be taken at its word.

`OUTPUT_DIR/training_state/checkpoint` (the index `tf.train.CheckpointManager` reads) names the
newest state, `ckpt-N` (`ckpt-N.index` and its `ckpt-N.data-*` shards). A power loss or a
stray command can leave the index missing, empty or garbled while the states are still there,
and can leave the newest state damaged (a shard cut short, its `.index` gone). TensorFlow then
sees no state at all, and a run would start from fresh weights and overwrite the saved ones.

Here the states on disk decide, not the index:

* `recover(state_dir)`, before a resume: incomplete states newer than the newest complete one
  are moved into `training_state/damaged/` (kept, never deleted, never overwritten by the
  resumed run), and an index that is missing, unreadable, or names another state than the newest
  complete one is rewritten from the states on disk;
* `set_aside_unreadable(state_dir, error)`: the newest state turned out unreadable when resumed
  from: its files go aside too and the previous state is named in the index;
* `states_on_disk(state_dir)`: the steps of the states whose files are all there.

Each says what it did in one line; with no state left to resume from, a `CheckpointError` naming
the directory (a run never starts from fresh weights over saved states).

Every rewrite of the index is atomic (`storage.write_atomic`), so a later power loss leaves the
old index or the new one.
"""

from __future__ import annotations

import os
import re

import tensorflow as tf

from bert_realformer import storage
from bert_realformer.checkpoints.tf1 import CheckpointError, DamagedCheckpoint

INDEX = "checkpoint"
DAMAGED = "damaged"
_STATE_FILE = re.compile(r"^ckpt-(\d+)\.(index|data-(\d{5})-of-(\d{5}))$")


def _files_by_step(state_dir: str) -> dict[int, list[str]]:
    found: dict[int, list[str]] = {}
    for name in storage.listdir(state_dir):
        match = _STATE_FILE.match(name)
        if match:
            found.setdefault(int(match.group(1)), []).append(name)
    return found


def _complete(names: list[str]) -> bool:
    """A state's files: its `.index` and every shard its shard names count."""
    shards = [name for name in names if ".data-" in name]
    if f"{names[0].split('.')[0]}.index" not in names or not shards:
        return False
    count = int(shards[0].rsplit("-of-", 1)[1])
    return len({name for name in shards if name.endswith(f"-of-{count:05d}")}) == count


def states_on_disk(state_dir: str) -> list[int]:
    """The steps of the complete states in `state_dir`, oldest first."""
    if not storage.isdir(state_dir):
        return []
    return sorted(step for step, names in _files_by_step(state_dir).items() if _complete(names))


def incomplete_states(state_dir: str) -> list[int]:
    """The steps of states some of whose files are missing (an `.index` without its shards, or
    shards without their `.index`)."""
    if not storage.isdir(state_dir):
        return []
    return sorted(step for step, names in _files_by_step(state_dir).items() if not _complete(names))


def recover(state_dir: str) -> list[str]:
    """Before a resume from `state_dir` (see the module docstring); returns what was done, a
    line each. A `CheckpointError` when there are state files but no complete state."""
    files = _files_by_step(state_dir)
    complete = sorted(step for step, names in files.items() if _complete(names))
    newest = complete[-1] if complete else -1
    broken = sorted(step for step, names in files.items() if not _complete(names) and step > newest)
    if broken and not complete:
        raise CheckpointError(
            f"{state_dir}/ckpt-{broken[-1]}: incomplete ({_missing(broken[-1], files[broken[-1]])}); "
            f"{state_dir} holds no complete training state to resume from: move the directory away to start over")
    said = []
    for step in broken:
        missing = _missing(step, files[step])
        said.append(f"{state_dir}/ckpt-{step} is incomplete ({missing}); moved its files to "
                    f"{_set_aside(state_dir, step)}; resuming from ckpt-{newest}")
    repaired = _repair_index(state_dir)
    return said + ([repaired] if repaired else [])


def set_aside_unreadable(state_dir: str, error: DamagedCheckpoint) -> str:
    """The newest state, `error.prefix`, cannot be read: its files go aside and the previous
    state is resumed (the line saying so); with no previous state, a `CheckpointError` naming the
    directory, nothing moved."""
    step = int(re.search(r"ckpt-(\d+)$", error.prefix).group(1))
    earlier = [s for s in states_on_disk(state_dir) if s < step]
    if not earlier:
        raise CheckpointError(f"{error}; {state_dir} holds no earlier training state to resume "
                              "from: move the directory away to start over") from None
    return f"{error}; moved its files to {_set_aside(state_dir, step)}; resuming from ckpt-{earlier[-1]}"


def _missing(step: int, names: list[str]) -> str:
    """What an incomplete state lacks, for a message: 'no ckpt-8.index', 'no data shards',
    or '1 of 2 data shards'."""
    if f"ckpt-{step}.index" not in names:
        return f"no ckpt-{step}.index"
    shards = [name for name in names if ".data-" in name]
    if not shards:
        return "no data shards"
    return f"{len(shards)} of {int(shards[0].rsplit('-of-', 1)[1])} data shards"


def _indexed_step(state_dir: str) -> int | None | str:
    """The step the index names; None when there is no index; 'unreadable' when it cannot be
    parsed (empty, garbled) or names no `ckpt-N`."""
    if not storage.exists(os.path.join(state_dir, INDEX)):
        return None
    try:
        state = tf.train.get_checkpoint_state(state_dir)
    except Exception:  # (TensorFlow raises ValueError or a protobuf ParseError for a garbled index)
        return "unreadable"
    if state is None or not state.model_checkpoint_path:
        return "unreadable"
    match = re.search(r"ckpt-(\d+)$", state.model_checkpoint_path)
    return int(match.group(1)) if match else "unreadable"


def write_index(state_dir: str, steps: list[int]) -> None:
    """The index naming `ckpt-<last of steps>` as the newest and all of `steps` as kept."""
    lines = [f'model_checkpoint_path: "ckpt-{steps[-1]}"'] + [f'all_model_checkpoint_paths: "ckpt-{s}"'
                                                            for s in steps]
    storage.write_atomic(os.path.join(state_dir, INDEX), "\n".join(lines) + "\n")


def _repair_index(state_dir: str) -> str | None:
    """Makes the index name the newest complete state on disk when it does not (missing, empty,
    garbled, or naming a state that is not complete). Returns what was wrong and done, for one
    line, or None when the index was right (or there are no states)."""
    steps = states_on_disk(state_dir)
    if not steps:
        return None
    indexed = _indexed_step(state_dir)
    if isinstance(indexed, int) and indexed in steps:
        if indexed == steps[-1]:
            return None
        newer = [s for s in steps if s > indexed]  # (a crash between a save and its index update)
        write_index(state_dir, steps)
        return (f"{state_dir}/{INDEX} named ckpt-{indexed} but ckpt-{newer[-1]} is newer and complete: "
                f"resuming from ckpt-{steps[-1]}")
    if indexed is None:
        wrong = f"{state_dir}/{INDEX} is missing"
    elif indexed == "unreadable":
        wrong = f"{state_dir}/{INDEX} cannot be read"
    else:
        wrong = f"{state_dir}/{INDEX} names ckpt-{indexed}, which is not complete on disk"
    write_index(state_dir, steps)
    return f"{wrong}; rebuilt it from the states on disk ({_listed(steps)}): resuming from ckpt-{steps[-1]}"


def _set_aside(state_dir: str, step: int) -> str:
    """Moves the files of state `step` into `state_dir/damaged/` (a later state of the same
    step would otherwise replace them) and rewrites the index without it. Returns where."""
    target = os.path.join(state_dir, DAMAGED)
    storage.makedirs(target)
    names = _files_by_step(state_dir).get(step, [])
    suffix = ""
    if any(storage.exists(os.path.join(target, name)) for name in names):  # (set aside before)
        suffix = f".{len(storage.listdir(target))}"
    for name in names:
        storage.rename(os.path.join(state_dir, name), os.path.join(target, name + suffix))
    remaining = states_on_disk(state_dir)
    if remaining:
        write_index(state_dir, remaining)
    else:
        storage.remove(os.path.join(state_dir, INDEX))
    return target


def _listed(steps: list[int]) -> str:
    shown = ", ".join(f"ckpt-{s}" for s in steps[-4:])
    return shown if len(steps) <= 4 else f"{len(steps)} states, the newest {shown}"
