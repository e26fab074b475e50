"""Errors a user can cause: reported in one line (file/record/config key + what to do), exit code 2."""


class UserError(Exception):
    """Bad input or config. `str(err)` is the whole one-line message shown to the user, with any secret a URL or
    a `name=value` pair in it carries masked (src/common/redact.py), whichever command prints it.

    >>> str(UserError("MLflow server http://me:pw@127.0.0.1:9 is unreachable"))
    'MLflow server http://***@127.0.0.1:9 is unreachable'
    """

    exit_code = 2

    def __str__(self) -> str:
        from src.common.redact import (
            redact_text,
        )  # local: loads hydra (slow import); imported when shown: pure modules raise this without loading Hydra

        return redact_text(super().__str__())
