"""The error type for user mistakes (a flag, a file, a line of data)."""


class InputError(ValueError):
    """Bad user input; the message names the flag, file or line and what was expected. The
    scripts print it as one line `error: <message>` and exit with status 2 (see `cli.run`)."""
    is_user_error = True
