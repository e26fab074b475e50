"""Turn a model's raw completion into the displayed slot it chose, or None (INVALID).

The core rule is the CoRA paper's: take the first token of the response's first line, strip
punctuation and spaces, and read it as a label. Fallbacks catch what real models emit when they
ignore the requested format ("The answer is B", "Answer: (B)", the option text itself). Anything
ambiguous ("A or B"), outside the shown labels, empty, or a refusal is None: an unparsed answer
is INVALID, never silently wrong.

>>> parse_answer("**B**. Paris is the capital.", ("A", "B", "C", "D"))
1
>>> parse_answer("The answer is C", ("A", "B", "C", "D"))
2
>>> parse_answer("E", ("A", "B", "C", "D")) is None
True
"""
from __future__ import annotations

import re
import string
from typing import Sequence

# Characters a label may be wrapped in: markdown, brackets, quotes (straight and typographic), punctuation.
_DECOR = string.punctuation + "“”‘’«»„‚`·…–—"
_DECOR_CLASS = r"[\s\*\(\[\{'\"“”‘’«»`_]*"
# A single label token: one letter or a 1-2 digit number, not followed by another word character.
_LABEL_TOKEN = r"(?P<label>[A-Za-z]|\d{1,2})(?![\w'’])"
_FALLBACK_PATTERNS = (
    # "Answer: B", "**Answer:** (B)", "Correct option - C", "Final answer:\n\nD"
    re.compile(r"(?i:\b(?:final\s+|correct\s+)?(?:answer|choice|option))s?\s*\**\s*[:\-–]" + _DECOR_CLASS + _LABEL_TOKEN),
    # "The answer is B", "the correct option would be (C)", "The answer to this question is **D**"
    re.compile(r"(?i:\b(?:answer|choice|option)\b[^.\n:]{0,40}?\b(?:is|be)\b:?)\s*(?i:option\s+|choice\s+)?"
               + _DECOR_CLASS + _LABEL_TOKEN),
    # "I choose B", "I'd go with option A", "I would select (C)"
    re.compile(r"(?i:\b(?:choose|chose|select|pick|go\s+with)\s+(?:option\s+|choice\s+|answer\s+)?)"
               + _DECOR_CLASS + _LABEL_TOKEN),
    # "Option B is correct", "choice (C) fits best"
    re.compile(r"(?i:\b(?:option|choice)\s+)" + r"[\(\[\*]*" + _LABEL_TOKEN),
)
# After a leading label, these mean the model hedged between labels: "A or B", "A/B", "A, B and C".
_HEDGE = re.compile(r"^[\*\)\]'\"’”`\.]*\s*(?:or|and|,|/|&|\|)\s*" + _DECOR_CLASS + _LABEL_TOKEN)
# "I think ...", "I'm not sure": a leading "I" is the pronoun when a verb follows, not label I.
_PRONOUN_FOLLOWERS = frozenset(
    "think believe am would will cannot can can't don't do need apologize guess feel know must have "
    "suppose choose pick select".split()
)
_ANSWER_PREFIX = re.compile(r"^(?i:(?:the\s+)?(?:final\s+|correct\s+)?(?:answer|choice|option)(?:\s+is)?\s*[:\-–]?\s*)")


def parse_answer(raw: str, labels: Sequence[str], options: Sequence[str] | None = None) -> int | None:
    """The displayed slot the completion `raw` chose among `labels` (its `options` texts for matching), or None."""
    if not raw or not raw.strip():
        return None
    index = {label: slot for slot, label in enumerate(labels)}
    numeric = all(label.isdigit() for label in labels)
    first_line = next(line for line in raw.strip().splitlines() if line.strip()).strip()

    verdict = _first_token_label(first_line, index, numeric=numeric)
    if verdict is not _NO_LABEL:
        return verdict

    found = set()
    for pattern in _FALLBACK_PATTERNS:
        for match in pattern.finditer(raw):
            label, after = match.group("label"), raw[match.end():]
            if label.islower() and not re.match(r"^(?:$|[\)\]\.:\*\n])", after):
                continue  # "the answer is a bit ...": lowercase counts only as "a)" / "a." / alone
            label = label.upper()
            if label not in index:
                if label.isdigit() if numeric else label.isalpha():
                    return None  # "The answer is E" with labels A-D: a label that was not shown
                continue
            hedge = _HEDGE.match(after)
            if hedge and index.get(hedge.group("label").upper(), index[label]) != index[label]:
                return None  # "The answer is A or B"
            found.add(index[label])
    if len(found) == 1:
        return found.pop()
    if len(found) > 1:
        return None  # "Option A ... the answer is B": the text names two labels
    if options:
        return _option_text_slot(first_line, options)
    return None


class _NoLabel:
    """Sentinel: the first token is not label-like at all, so the fallbacks should look further."""


_NO_LABEL = _NoLabel()


def _first_token_label(line: str, index: dict[str, int], *, numeric: bool) -> int | None | _NoLabel:
    """CoRA's rule on the first line: a slot, None (label-like but not shown, or hedged), or _NO_LABEL."""
    words = line.split()
    head, after = words[0], words[1:]
    if not head.strip(_DECOR) and after:  # "** B**", "( B )": the decoration stands apart from the label
        head, after = head + after[0], after[1:]
    token = head.strip(_DECOR)
    decorated = token != head
    glued = re.match(r"^[\*\(\[\{'\"“‘`]*([A-Za-z]|\d{1,2})[\)\.\:\]](?=\w)", head)
    if glued and token not in index:  # "B)Paris", "(C).Mitochondria"
        token, decorated = glued.group(1), True
    alone = not after
    next_word = after[0].strip(_DECOR).lower() if after else ""
    if token == "I" and not decorated and next_word in _PRONOUN_FOLLOWERS:
        return _NO_LABEL  # "I think ...": the pronoun, even when nine options make I a label

    slot = _label_slot(token, index, decorated=decorated, alone=alone)
    if slot is None:
        label_shaped = (token.isdigit() and len(token) <= 2) if numeric else (
            len(token) == 1 and token.isalpha() and (token.isupper() or decorated or alone))
        return None if label_shaped else _NO_LABEL
    rest = line[line.find(token) + len(token):]
    hedge = _HEDGE.match(rest)
    if hedge and index.get(hedge.group("label").upper(), slot) != slot:
        return None
    return slot


def _label_slot(token: str, index: dict[str, int], *, decorated: bool, alone: bool) -> int | None:
    if token in index:
        return index[token]
    # Lowercase "b" counts only where it cannot be an article or a word: alone on the line or decorated like "b)".
    if len(token) == 1 and token.islower() and token.upper() in index and (decorated or alone):
        return index[token.upper()]
    return None


def _normalise(text: str) -> str:
    return " ".join(text.casefold().split()).strip(_DECOR + " ")


def _option_text_slot(first_line: str, options: Sequence[str]) -> int | None:
    """The slot whose option text is exactly the first line (or its first sentence), ignoring case and decoration."""
    targets = {_normalise(first_line), _normalise(_ANSWER_PREFIX.sub("", first_line.strip(_DECOR + " ")))}
    targets |= {_normalise(first_line.split(". ")[0])}
    targets.discard("")
    slots = [slot for slot, text in enumerate(options) if _normalise(text) in targets]
    return slots[0] if len(slots) == 1 else None  # two slots with one text: ambiguous
