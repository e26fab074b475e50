"""Answer formats as objects: how a variant is asked, what the model sees, how its answer is read and recorded.

`FORMATS` maps a `Variant.fmt` to its format; `format_of` finds a request's.

>>> format_of(Request("p", ("A", "B"), ("x", "y"), seed=0)).name
'mcq'
>>> format_of(FormatRequest("p", ("Yes", "No"), ("Yes", "No"), seed=0, fmt="true_false")) is TRUE_FALSE
True
>>> [(f.name, f.generated_only) for f in FORMATS.values()]
[('mcq', False), ('true_false', False), ('multi_select', True)]
"""

from __future__ import annotations

from ..backends.base import Request
from .base import AnswerFormat, FormatRequest
from .mcq import MCQ
from .multi_select import MULTI_SELECT
from .true_false import TRUE_FALSE

FORMATS: dict[str, AnswerFormat] = {f.name: f for f in (MCQ, TRUE_FALSE, MULTI_SELECT)}

__all__ = ["AnswerFormat", "FORMATS", "FormatRequest", "MCQ", "MULTI_SELECT", "TRUE_FALSE", "format_of"]


def format_of(request: Request) -> AnswerFormat:
    """The format a request asks in: a plain Request is mcq."""
    return FORMATS[request.fmt if isinstance(request, FormatRequest) else MCQ.name]
