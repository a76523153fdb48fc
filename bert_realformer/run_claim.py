"""One training run per output directory: a claim file `OUTPUT_DIR/run_claim.json`.

A training run claims its `--output_dir` before it builds anything (`claim`); a second run on a
claimed directory stops at once with one line naming the holder, instead of resuming from the
other run's mid-run checkpoints and overwriting its exports. The claim holds the host, pid, start
time and a heartbeat that a thread refreshes every `HEARTBEAT_SECONDS`; it is removed when the
run ends (`Claim.release`: the driver that claimed it is closed by the flow that made it, and at
the process's exit whatever way it ends).

A claim left by a run that was killed without cleaning up (SIGKILL, a machine lost) is taken
over: when its process is gone from this host, or its heartbeat is older than `STALE_SECONDS`
(another host's run). So kill-and-resume keeps working. Eval- and predict-only runs read a
claimed directory's finished checkpoints without claiming it. The file goes through
`bert_realformer.storage`, so this works on gs:// as on a local disk (on an object store the
create-if-absent is a write and a read-back: two runs started within the same second may both
pass; the next heartbeat finds the loser, which stops).
"""

from __future__ import annotations

import atexit
import datetime
import json
import logging
import os
import socket
import sys
import threading
import time
import uuid

from bert_realformer import storage
from bert_realformer.errors import InputError

CLAIM_FILE = "run_claim.json"
HEARTBEAT_SECONDS = 60.0
STALE_SECONDS = 300.0

logger = logging.getLogger(__name__)


class DirectoryInUseError(InputError):
    """Another live run holds the output directory."""


class Claim:
    """This process's claim on an output directory (see the module docstring)."""

    def __init__(self, output_dir: str):
        self.output_dir = output_dir
        self.path = os.path.join(output_dir, CLAIM_FILE)
        self.token = uuid.uuid4().hex
        self.started = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
        self.lost_to: dict | None = None  # the claim that replaced ours, if another run took over
        self._stop = threading.Event()
        self._thread = None

    def _content(self) -> str:
        return json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "started": self.started,
                           "heartbeat": time.time(), "token": self.token, "command": " ".join(sys.argv)},
                          indent=1) + "\n"

    def _heartbeat(self):
        while not self._stop.wait(HEARTBEAT_SECONDS):
            holder = read_claim(self.path)
            if holder is not None and holder.get("token") != self.token:
                self.lost_to = holder
                logger.error("%s was taken over by %s", self.output_dir, describe(holder))
                return
            try:
                storage.write_atomic(self.path, self._content())
            except Exception as error:  # a transient storage error: try again at the next beat
                logger.warning("cannot refresh %s: %s", self.path, error)

    def check_held(self) -> None:
        """A `DirectoryInUseError` when another run took the directory over (this run's claim had
        gone stale: its heartbeat stopped for longer than `STALE_SECONDS`)."""
        if self.lost_to is not None:
            raise DirectoryInUseError(f"output_dir={self.output_dir} was taken over by {describe(self.lost_to)} "
                                      "(this run's claim had gone stale): stopping", options=("output_dir",))

    def release(self) -> None:
        """Stops the heartbeat and removes the claim file if it is still ours."""
        self._stop.set()
        atexit.unregister(self.release)
        holder = read_claim(self.path)
        if holder is not None and holder.get("token") == self.token:
            storage.remove(self.path)


def read_claim(path: str) -> dict | None:
    """The claim at `path`, {} for one that cannot be parsed (cut short), None when there is none."""
    try:
        return json.loads(storage.read_bytes(path).decode("utf-8"))
    except InputError:
        return None
    except ValueError:
        return {}


def describe(holder: dict) -> str:
    return (f"a run on host {holder.get('host', '?')}, pid {holder.get('pid', '?')}, "
            f"started {holder.get('started', '?')}")


def _is_stale(holder: dict) -> str | None:
    """Why a claim's run is gone, or None while it may be running."""
    heartbeat = holder.get("heartbeat")
    if not isinstance(heartbeat, (int, float)):
        return "its claim file is damaged"
    if holder.get("host") == socket.gethostname() and isinstance(holder.get("pid"), int):
        if holder["pid"] == os.getpid():
            return "it was an earlier run in this process"
        try:
            os.kill(holder["pid"], 0)
        except ProcessLookupError:
            return f"process {holder['pid']} is gone"
        except PermissionError:
            pass  # alive, another user's
    age = time.time() - heartbeat
    if age > STALE_SECONDS:
        return f"its heartbeat is {age / 60:.0f} minutes old"
    return None


def claim(output_dir: str) -> Claim:
    """Claims `output_dir` for this process (creating it), or raises `DirectoryInUseError` naming
    the live run that holds it. A stale claim is taken over, with a log line saying whose."""
    storage.makedirs(output_dir)
    mine = Claim(output_dir)
    for _ in range(3):
        if storage.create_exclusive(mine.path, mine._content()):
            break
        holder = read_claim(mine.path)
        if holder is None:
            continue  # released between our two looks
        reason = _is_stale(holder)
        if reason is None:
            raise DirectoryInUseError(
                f"output_dir={output_dir} is in use by {describe(holder)} ({mine.path}): wait for it to "
                "finish or stop it, or choose another output_dir (a claim whose run was killed is taken "
                f"over once its process is gone or its heartbeat is {STALE_SECONDS / 60:.0f} minutes old)",
                options=("output_dir",))
        logger.warning("taking over %s from %s: %s", output_dir, describe(holder), reason)
        storage.remove(mine.path)
    else:
        raise DirectoryInUseError(f"output_dir={output_dir}: cannot claim {mine.path} (other runs keep taking it)",
                                  options=("output_dir",))
    mine._thread = threading.Thread(target=mine._heartbeat, name="run-claim-heartbeat", daemon=True)
    mine._thread.start()
    atexit.register(mine.release)  # (whatever way the process ends; its holder releases it first)
    return mine
