"""The one question type every benchmark loader produces."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Question:
    """A multiple-choice question as the benchmark file holds it.

    >>> q = Question(id="q1", question="2+2?", options=("3", "4"), answer=1)
    >>> q.options[q.answer]
    '4'
    """

    id: str
    question: str
    options: tuple[str, ...]
    answer: int  # index into `options` of the correct option
    subject: str | None = None
    split: str = "test"
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def n_options(self) -> int:
        return len(self.options)
