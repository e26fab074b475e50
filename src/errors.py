"""Errors a user can cause: reported in one line (file/record/config key + what to do), exit code 2."""


class UserError(Exception):
    """Bad input or config. `str(err)` is the whole one-line message shown to the user."""

    exit_code = 2
