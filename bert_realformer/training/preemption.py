"""Stopping a training run cleanly on SIGTERM or SIGINT.

Preemptible machines (TPU VMs, spot GPUs, Kubernetes, Slurm) send SIGTERM some seconds before
they kill. While `StopSignals` is active the signal is recorded instead of ending the process;
the driver finishes the loop of steps in progress (about 10 s, at most `--iterations_per_loop`: the
signal handler runs between loops, when control is back in Python), saves a training state at
that step and ends the run with `bert_realformer.errors.Stopped` (exit status 143 or 130). A
second signal of the same kind ends the process at once.

On several machines the workers agree (`StopAgreement`): after every loop they combine, in one
all-reduce, which signals each received (and the size of the next loop), so all of them save at
the same step, also those the signal did not reach.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

import tensorflow as tf

from bert_realformer import console
from bert_realformer.training.distribution import this_worker

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopSignals:
    """A context in which SIGTERM and SIGINT are recorded in `received` (the first one's number)
    rather than acted on. Installed only from the main thread (elsewhere it records nothing)."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.received: int | None = None
        self._previous = {}

    def _handle(self, signal_number, frame):
        if self.received == signal_number:  # asked twice: stop now
            signal.signal(signal_number, signal.SIG_DFL)
            os.kill(os.getpid(), signal_number)
            return
        self.received = signal_number
        console.say(f"{signal.Signals(signal_number).name} received: saving a training state after the current loop "
                   "of steps (send it again to stop at once)", self.stream)

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for number in SIGNALS:
                self._previous[number] = signal.signal(number, self._handle)
        return self

    def __exit__(self, *exc_info):
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous.clear()


class StopAgreement:
    """`agreed(received, next_steps, finish)`: the signal to stop for (SIGTERM before SIGINT, or
    None), the size of the next loop of steps, and whether to finish training now (early
    stopping, which only the chief evaluates), the same on every worker of `strategy` (the
    workers' sizes, measured each on its own clock, averaged and rounded down). One all-reduce
    per call on several workers; none on one."""

    def __init__(self, strategy: tf.distribute.Strategy):
        self.strategy = strategy
        self._several = this_worker(strategy)[0] > 1
        if self._several:
            @tf.function
            def averaged(values):  # every replica holds its worker's values
                return strategy.reduce(tf.distribute.ReduceOp.MEAN, strategy.run(tf.identity, args=(values,)),
                                       axis=None)
            self._averaged = averaged

    def agreed(self, received: int | None, next_steps: int, finish: bool = False) -> tuple[int | None, int, bool]:
        if not self._several:
            return received, next_steps, finish
        values = tf.constant([float(received == number) for number in SIGNALS] + [float(finish), float(next_steps)])
        averaged = self._averaged(values).numpy()  # a flag is > 0 where any worker's is 1
        stop = next((number for number, value in zip(SIGNALS, averaged) if value > 0), None)
        return stop, max(1, int(averaged[-1])), bool(averaged[-2] > 0)
