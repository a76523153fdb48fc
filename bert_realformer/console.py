"""What a run tells its user as it goes (the weights it starts from, progress, evaluations, a
signal received, a study's runs): one line at a time, to stderr or the stream the caller gives
(tests and benchmarks pass their own). Library code says such lines through `say`; warnings
and diagnostics go through `logging` (the scripts show them as `warning: ...`,
`plain_warnings`)."""

import contextlib
import logging
import sys
from collections.abc import Iterator
from typing import TextIO

PACKAGES = ("bert_realformer", "modeling", "tokenization")


def say(text: str, stream: TextIO | None = None) -> None:
    """One line for the user, flushed at once."""
    print(text, file=stream or sys.stderr, flush=True)


@contextlib.contextmanager
def plain_warnings(stream: TextIO | None = None) -> Iterator[logging.Handler]:
    """While in the block, the project's warnings (and errors) are `warning: message` lines on
    stderr instead of absl's log format (what a script's run does); afterwards the loggers are
    as they were."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(_Plain())
    handler.setLevel(logging.WARNING)
    loggers = [logging.getLogger(name) for name in PACKAGES]
    propagated = [logger.propagate for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.propagate = False
    try:
        yield handler
    finally:
        for logger, propagate in zip(loggers, propagated, strict=True):
            logger.removeHandler(handler)
            logger.propagate = propagate


class _Plain(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname.lower()}: {record.getMessage()}"
