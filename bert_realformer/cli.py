"""How every command-line script runs: user mistakes end in one line, not a traceback.

    from bert_realformer.cli import run
    ...
    if __name__ == "__main__":
        run(main)

An exception class with `is_user_error = True` (`bert_realformer.errors.InputError`,
`modeling.ConfigError`, `modeling.CheckpointError`) is such a mistake: `run` prints
`error: <message>` and exits 2. `run` also quiets TensorFlow's start-up log (unless the user set
`TF_CPP_MIN_LOG_LEVEL`) before `main` imports TensorFlow, and absl's INFO lines (unless
`--verbosity` is given).
"""

import os
import sys


def run(main):
    """`absl.app.run(main)`, printing `error: <message>` and exiting 2 on a user mistake."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from absl import app

    def guarded(argv):
        from absl import flags, logging
        if not flags.FLAGS["verbosity"].present:  # TensorFlow's INFO chatter off by default
            logging.set_verbosity(logging.WARNING)
        try:
            return main(argv)
        except Exception as error:
            if getattr(type(error), "is_user_error", False):
                print(f"error: {error}", file=sys.stderr)
                sys.exit(2)
            raise
    app.run(guarded)
