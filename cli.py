"""What every command-line script shares: user mistakes end in one line, not a traceback.

    from cli import InputError, run
    ...
    if __name__ == "__main__":
        run(main)

An exception class with `is_user_error = True` (`InputError` here, `ConfigError` and
`CheckpointError` in `modeling`) is such a mistake: `run` prints `error: <message>` and exits 2.
Importing this module before TensorFlow also quiets TensorFlow's start-up log (unless the user
set `TF_CPP_MIN_LOG_LEVEL`).
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app  # noqa: E402


class InputError(ValueError):
    """Bad user input (a flag, a file, a line of data); the message names it."""
    is_user_error = True


def run(main):
    """`absl.app.run(main)`, printing `error: <message>` and exiting 2 on a user mistake."""
    def guarded(argv):
        from absl import flags, logging
        if not flags.FLAGS["verbosity"].present:  # TensorFlow's INFO chatter off by default
            logging.set_verbosity(logging.WARNING)
        try:
            return main(argv)
        except Exception as error:  # noqa: BLE001 - re-raised unless it is a user mistake
            if getattr(type(error), "is_user_error", False):
                print(f"error: {error}", file=sys.stderr)
                sys.exit(2)
            raise
    app.run(guarded)
