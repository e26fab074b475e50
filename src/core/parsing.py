"""Turn a model's raw completion into the displayed slot it chose, or None (INVALID), and say which rule decided.

The core rule is the CoRA paper's: take the first token of the response's first line, strip
punctuation and spaces, and read it as a label. Before it, reasoning blocks (`<think>…</think>`) are
removed; an unclosed one means the model has not answered yet. A leading "A" or "I" followed by a
sentence (a lowercase word) is the English word, not a label ("A cat is a mammal, so the answer is C."
is C; "A. Paris", "A", "A False, True" are A), unless the line goes on with that option's text; "A is
correct" is read by the answer phrases. When the first token is no label, the fallbacks read what real
models emit when they ignore the requested format, strongest first: `\\boxed{B}`; answer phrases
("The answer is B", "**Answer:** (B)", "Final Answer: D", `{"answer": "B"}`, "(B) is correct"); the
option text itself ("Paris", "The answer is Paris"). Anything ambiguous ("A or B", two phrases naming
different labels, a restated list of the options), outside the shown labels, empty, or a refusal is
None: an unparsed answer is INVALID, never silently wrong. A hedge that names another label after the answer
is the same hedge whether it follows a comma, the next sentence, a parenthesis or a "though" ("C, or maybe B",
"C. Or maybe B?", "Answer: C. Hmm, or maybe B?", "C (or possibly B)", "The answer is C, though it could be B."
are all invalid_hedge); a label only mentioned ("C (not B)", "C. B is wrong") leaves the answer C.

A completion that revises itself ("The answer is B. Wait, actually it's C.", "B\n\nOn second thought, D",
"Answer: B\nCorrection: C") is read piece by piece, cut at its revision markers ("wait", "actually", "on
second thought", "correction:", "no, it's", "scratch that", ...): the last piece that commits to an answer
wins (rule `self_correction` when it changes the answer). A revision that names another label without
committing to it ("B, or maybe C", "B. Wait, maybe C?") is INVALID, and so is a cut text that stops after a
revision marker before the revised answer. A marker followed by no label ("B. Actually, Paris has been the
capital since 987") revises nothing. Inside each piece the phrase tiers hold (a strong cue beats a plain one).

A completion cut by `max_new_tokens` (`truncated=True`) keeps its verdict when the verdict does not
depend on the cut text (a complete label followed by a separator, a newline or the end of the text,
and no dangling "or"/","); otherwise it is INVALID with rule "truncated", and so is an option text that
ends the cut text ("Paris" may have been "Paris, Texas") or a text with no answer before the cut.

Every verdict comes with the rule that made it (`parse_with_rule`), stored per trial as `parse_rule`:
first_token, answer_phrase, boxed, option_text, self_correction (each prefixed "reasoning_stripped+" when a reasoning
block was removed), or invalid_empty, invalid_hedge, invalid_conflict, invalid_out_of_range,
invalid_option_list, invalid_unclosed_reasoning, invalid_no_label, truncated.

>>> parse_with_rule("**B**. Paris is the capital.", ("A", "B", "C", "D")).slot
1
>>> parse_with_rule("The answer is C", ("A", "B", "C", "D")).slot
2
>>> parse_with_rule("E", ("A", "B", "C", "D")).slot is None
True
>>> parse_with_rule("<think>A or C? C.</think>A cat is a mammal, so the answer is C.", ("A", "B", "C", "D"))
Parse(slot=2, rule='reasoning_stripped+answer_phrase', slots=None)
>>> parse_with_rule("B. Paris is", ("A", "B", "C", "D"), truncated=True)
Parse(slot=1, rule='first_token', slots=None)
>>> parse_with_rule("The capital of France is", ("A", "B", "C", "D"), truncated=True)
Parse(slot=None, rule='truncated', slots=None)
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

# Characters a label may be wrapped in: markdown, brackets, quotes (straight and typographic), punctuation.
_DECOR = string.punctuation + "“”‘’«»„‚`·…–—"
_DECOR_CLASS = r"[\s\*\(\[\{'\"“”‘’«»`_]*"
# A single label token: one letter or a 1-2 digit number, not followed by another word character.
_LABEL_TOKEN = r"(?P<label>[A-Za-z]|\d{1,2})(?![\w’]|'\w)"  # "B", "'B'", not "B's"
_LABEL_OPEN = r"(?<![\w\\])(?<!\w['’])"  # a label starts a word: not "don't", nor a LaTeX command's letter

# Reasoning blocks, closed and unclosed; "</think>" alone means the block began in the prompt.
_THINK_TAG = r"(?:think|thinking|reasoning|thought)"
_THINK_BLOCK = re.compile(rf"<{_THINK_TAG}>.*?</{_THINK_TAG}>", re.S | re.I)
_THINK_OPEN = re.compile(rf"<{_THINK_TAG}>", re.I)
_THINK_CLOSE = re.compile(rf"</{_THINK_TAG}>", re.I)

_STRONG, _PLAIN = 0, 1  # phrase tiers: a strong phrase ("Final answer:") outranks a plain one
_PHRASES = (
    # "Final Answer: D", "the final answer is (B)", {"answer": "B"}
    (
        _STRONG,
        re.compile(
            r"(?i:\bfinal\s+answer(?:\s+is)?|[\"']answer[\"'])\s*\**\s*[:\-–]?"
            + _DECOR_CLASS
            + _LABEL_OPEN
            + _LABEL_TOKEN
        ),
    ),
    # "Answer: B", "**Answer:** (B)", "ANSWER: B", "Correct option - C", "Final answer:\n\nD", "| Answer | B |"
    (
        _PLAIN,
        re.compile(
            r"(?i:\b(?:correct\s+|right\s+|best\s+)?(?:answer|choice|option)s?)[\s\*\"']*[:\-–|]"
            + _DECOR_CLASS
            + _LABEL_OPEN
            + _LABEL_TOKEN
        ),
    ),
    # "The answer is B", "the correct option would be (C)", "The correct answer is option B: Paris"
    (
        _PLAIN,
        re.compile(
            r"(?i:\b(?:answer|choice|option)\b[^.\n:]{0,40}?\b(?:is|be)\b:?)\s*"
            r"(?i:option\s+|choice\s+|letter\s+)?" + _DECOR_CLASS + _LABEL_OPEN + _LABEL_TOKEN
        ),
    ),
    # "I choose B", "I'd go with option A", "I would select (C)", "I'd say D"
    (
        _PLAIN,
        re.compile(
            r"(?i:\b(?:choose|chose|select|pick|go\s+with|opt\s+for|(?:I'd|I\s+would)\s+say)\s+"
            r"(?:option\s+|choice\s+|answer\s+)?)" + _DECOR_CLASS + _LABEL_OPEN + _LABEL_TOKEN
        ),
    ),
    # "I believe it's B", "It must be (C)": a capital label only ("it is a ..." is an article)
    (
        _PLAIN,
        re.compile(
            r"(?i:\bit(?:'s|’s|\s+is|\s+must\s+be|\s+should\s+be|\s+would\s+be))\s+(?i:option\s+)?"
            r"[\(\[\*\"'“]*(?P<label>[A-Z]|\d{1,2})(?![\w'’])"
        ),
    ),
    # "Option B is correct", "(B) is correct", "B is the correct answer", "A is right"
    (
        _PLAIN,
        re.compile(
            r"(?:(?i:\b(?:option|choice|answer|letter)\s+)|(?<![\w'’]))[\(\[\*\"'“]*"
            r"(?P<label>[A-Z]|\d{1,2})(?![\w'’])[\)\]\*\"'”]*\s+(?i:is|would\s+be|seems|must\s+be)\s+"
            r"(?i:the\s+)?(?i:most\s+)?(?i:correct|right|best|accurate|true)\b"
        ),
    ),
)
_BOXED = re.compile(r"\\boxed\s*\{((?:[^{}]|\{[^{}]*\})*)\}")
_LATEX_WRAP = re.compile(r"\\(?:text|textbf|mathrm|mathbf|textrm)\s*\{([^{}]*)\}")
# After a label, these mean the model hedged between labels: "A or B", "A/B", "A, B and C", "B, or maybe C".
_TENTATIVE = r"(?:maybe|perhaps|possibly|probably)"
_HEDGE = re.compile(
    r"^[\*\)\]'\"’”`\.]*\s*(?:,\s*)?(?:or|and|,|/|&|\|)\s*(?i:"
    + _TENTATIVE
    + r"\s+)?(?:option\s+)?"
    + _DECOR_CLASS
    + _LABEL_TOKEN
)
# The same hedge said after the answer in the next sentence, in parentheses or in a "though" clause: "C. Or maybe
# B?", "Answer: C. Hmm, or maybe B?", "C (or possibly B)", "The answer is C, though it could be B."
_HEDGE_AFTER = re.compile(
    r"^[\*\)\]'\"’”`]*\s*(?:[.!;:]+\s*(?i:(?:hmm+|well|um+|uh+)\W+)?|\(\s*|,?\s*(?i:though|although|but)\s+)"
    r"(?i:or\s+(?:" + _TENTATIVE + r"\s+)?|" + _TENTATIVE + r"\s+|(?:it|that|this)\s+(?:could|might|may)\s+"
    r"(?:also\s+)?be\s+)(?:option\s+)?" + _DECOR_CLASS + _LABEL_TOKEN
)
# After a label read by _HEDGE_AFTER, the English words "A" and "I" ("Perhaps I am wrong") go on with a
# lowercase word; a label goes on with punctuation, the end, or a verb on it ("or maybe A is right").
_WORD_AFTER = re.compile(r"^\s+(?!(?:is|was|would|could|might|seems|too|as|instead|though)\b)[a-z]")
# Revision markers: what follows one may replace the answer before it. "actually" alone is weak (it often
# only explains: "B. Actually, Paris ..."): it revises only when an answer follows it.
_REVISION = re.compile(
    r"(?i)(?<![\w'’])(?:(?P<weak>actually)|wait|hold\s+on|on\s+(?:second|further)\s+thought|"
    r"on\s+reflection|correction|scratch\s+that|let\s+me\s+reconsider|I\s+was\s+wrong|"
    r"I\s+made\s+a\s+mistake|oops|no(?=\s*,|\s*[—–]|\s+-\s|\s+wait))(?![\w'’])[\s,:;.!—–\-*]*"
)
# A piece of a revision that names a label without committing to it: "maybe C", "C?", "or is it D".
_UNSURE = re.compile(r"(?i)\b(?:" + _TENTATIVE + r"|might\s+be|could\s+be|or)\b|\?")
# Anywhere: "Either A or C", "B or D", "A/C" between two shown labels.
_HEDGE_ANY = re.compile(
    r"(?<![\w'’])[\(\[\*]*(?P<a>[A-Z]|\d{1,2})(?![\w'’])[\)\]\*]*\s*(?:,\s*)?(?:or|and|/)\s*"
    r"(?:option\s+)?[\(\[\*]*(?P<b>[A-Z]|\d{1,2})(?![\w'’])"
)
# A cut text that stops right after a connective may have gone on naming another label.
_DANGLING = re.compile(r"^[\s\*\)\]'\"’”`\.]*(?:,|/|&|\bor\b|\band\b|\beither\b)[\s\W]*$", re.I)
# A line that is only an answer heading ("Final answer:", "### Answer") announces the answer on the next line.
_ANSWER_HEADING = re.compile(r"^[\W_]*(?i:(?:the\s+)?(?:final\s+|correct\s+)?answer)[\W_]*$")
_ANSWER_PREFIX = re.compile(
    r"^(?i:(?:the\s+)?(?:final\s+|correct\s+|right\s+|best\s+)?"
    r"(?:answer|choice|option)(?:\s+(?:is|would\s+be))?\s*[:\-–]?\s*)"
)
_TEXT_SUFFIX = re.compile(
    r"(?i)\s+(?:is|would\s+be)\s+(?:the\s+)?(?:correct|right|best)(?:\s+(?:answer|option|choice))?\W*$"
)
_LISTED = r"^\s*[\(\[\*]*({label})[\.\)\]:]\s"  # "A. Paris": a line that may restate an option


@dataclass(frozen=True)
class Parse:
    """A parsed answer: the displayed slot (None = INVALID) and the rule that decided it."""

    slot: int | None
    rule: str
    slots: tuple[int, ...] | None = None  # a set of labels (multi_select): every displayed slot named


def strip_reasoning(raw: str) -> tuple[str, str]:
    """The answer text outside reasoning blocks, and what was found: "" none, "stripped", "unclosed".

    >>> strip_reasoning("<think>maybe A</think>\\nB")
    ('\\nB', 'stripped')
    >>> strip_reasoning("<think>Let me see, A or")
    ('', 'unclosed')
    """
    text = _THINK_BLOCK.sub("", raw)
    state = "stripped" if text != raw else ""
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:
        text, state = text[closes[-1].end() :], "stripped"
    opened = _THINK_OPEN.search(text)
    if opened:
        return text[: opened.start()], "unclosed"
    return text, state


@lru_cache(maxsize=256)
def _label_slots(labels: tuple[str, ...]) -> dict[str, int]:
    """{label: slot} of a list of labels, made once per list (a run shows a few, to every trial); read, never
    written: the dict is shared."""
    return {label: slot for slot, label in enumerate(labels)}


def parse_with_rule(
    raw: str, labels: Sequence[str], options: Sequence[str] | None = None, *, truncated: bool = False
) -> Parse:
    """The displayed slot the completion `raw` chose among `labels` (its `options` texts for matching), or None,
    with the rule that decided it; `truncated`: generation hit max_new_tokens. The mcq format's parser."""
    if not raw or not raw.strip():
        return Parse(None, "truncated" if truncated else "invalid_empty")
    index = _label_slots(tuple(labels))
    bare = raw.strip()
    if bare in index:  # a shown label alone ("B", " B\n"): the first-token rule with nothing after it to read
        return Parse(index[bare], "first_token")
    text, reasoning = strip_reasoning(raw)
    if reasoning == "unclosed":
        return Parse(None, "truncated" if truncated else "invalid_unclosed_reasoning")
    if not text.strip():
        return Parse(None, "invalid_empty")
    verdict = _revised(text, labels, options, truncated=truncated) or _parse_text(
        text, labels, options, truncated=truncated
    )
    if reasoning and verdict.slot is not None:
        return Parse(verdict.slot, f"reasoning_stripped+{verdict.rule}")
    return verdict


def _parse_text(text: str, labels: Sequence[str], options: Sequence[str] | None, *, truncated: bool) -> Parse:
    index = {label: slot for slot, label in enumerate(labels)}
    numeric = all(label.isdigit() for label in labels)
    text = text.strip()
    lines = [line for line in text.splitlines() if line.strip()]
    listed, copied = _restated_options(text, labels)

    if not listed:
        verdict = _first_token_label(lines[0].strip(), text, index, options, numeric=numeric, truncated=truncated)
        if verdict is not None:
            return verdict
        strong = _phrase_slots(
            text, index, options, numeric=numeric, truncated=truncated, skip=copied, tiers=(_STRONG,)
        )
        if strong is not None:  # "The answer is A.\nFinal answer: B": a strong cue beats the first line's phrase
            return strong if strong.slot is None else Parse(strong.slot, "answer_phrase")
        if _ANSWER_HEADING.match(lines[0]) and len(lines) > 1:  # "Final answer:\n\nC"
            rest = text[text.find(lines[1]) :]
            verdict = _first_token_label(lines[1].strip(), rest, index, options, numeric=numeric, truncated=truncated)
            if verdict is not None:
                return Parse(verdict.slot, "answer_phrase") if verdict.slot is not None else verdict
        prefix = _ANSWER_PREFIX.match(lines[0].strip(" *#"))
        if prefix and prefix.end():  # "Option (B)", "Answer - C: Paris"
            line = lines[0].strip(" *#")[prefix.end() :].strip()
            if line:
                verdict = _first_token_label(
                    line,
                    text[text.find(line) :],
                    index,
                    options,
                    numeric=numeric,
                    truncated=truncated,
                    leading_word=False,
                )
                if verdict is not None:
                    return Parse(verdict.slot, "answer_phrase") if verdict.slot is not None else verdict

    for finder, rule in ((_boxed_slots, "boxed"), (_phrase_slots, "answer_phrase")):
        found = finder(text, index, options, numeric=numeric, truncated=truncated, skip=copied)
        if found is not None:
            return found if found.slot is None else Parse(found.slot, rule)
    if options:
        found = _option_text_slot(text, lines, options, truncated=truncated)
        if found is not None:
            return found
    if truncated:
        return Parse(None, "truncated")
    if copied:
        return Parse(None, "invalid_option_list")
    for match in _HEDGE_ANY.finditer(text):
        a, b = index.get(match.group("a")), index.get(match.group("b"))
        if a is not None and b is not None and a != b:
            return Parse(None, "invalid_hedge")
    return Parse(None, "invalid_no_label")


def _revised(text: str, labels: Sequence[str], options: Sequence[str] | None, *, truncated: bool) -> Parse | None:
    """The verdict of a completion that revises its answer, or None when it revises nothing (the usual rules
    read the whole text). Pieces between revision markers are read on their own; the last that commits wins."""
    marks = list(_REVISION.finditer(text))
    if not marks:
        return None
    ends = [m.start() for m in marks[1:]] + [len(text)]
    pieces = [(m, text[m.end() : end]) for m, end in zip(marks, ends)]
    head = text[: marks[0].start()]
    first = _parse_text(head, labels, options, truncated=False) if head.strip() else None
    committed = first.slot if first is not None else None
    shown = re.compile(r"(?<![\w'’])[\(\[\*]*(?:" + "|".join(re.escape(label) for label in labels) + r")(?![\w'’])")
    final, unsure, open_revision = None, False, False
    for k, (mark, piece) in enumerate(pieces):
        last = k == len(pieces) - 1
        verdict = _parse_text(piece, labels, options, truncated=truncated and last) if piece.strip() else None
        if verdict is not None and verdict.slot is not None:
            final, unsure, open_revision = verdict.slot, False, False
        elif shown.search(piece) and (
            _UNSURE.search(piece) or verdict is not None and verdict.rule in ("invalid_hedge", "invalid_conflict")
        ):
            unsure = True  # "Wait, maybe C?": another label, not committed to
        elif not mark.group("weak"):
            open_revision = True  # "Wait," and then no answer (yet)
    if (committed is not None or final is not None) and unsure:
        return Parse(None, "invalid_hedge")
    if truncated and open_revision:
        return Parse(None, "truncated")  # cut after "Wait, actually it's": the revised answer is lost
    if final is None or final == committed:
        return None
    if committed is None:  # "No, it's C": an answer, read by the usual rules; "First guess: **A** ... **C**": C
        whole = _parse_text(text, labels, options, truncated=truncated)
        return whole if whole.slot is not None else Parse(final, "self_correction")
    return Parse(final, "self_correction")


def _restated_options(text: str, labels: Sequence[str]) -> tuple[bool, set[int]]:
    """Lines that copy the option list: two consecutive lines that start with different labels ("A. Paris",
    "B. Lyon"). Whether the first two lines are such a pair (then the first token is no answer), and the
    offsets of those lines' labels in `text` (no answer phrase reads them: "Choices:\nA. Paris")."""
    alternatives = "|".join(re.escape(label) for label in sorted(labels, key=len, reverse=True))
    pattern = re.compile(_LISTED.format(label=alternatives))
    starts, offset = [], 0  # per non-empty line: (label, offset of the label) or None
    for line in text.split("\n"):
        if line.strip():
            match = pattern.match(line)
            starts.append((match.group(1), offset + match.start(1)) if match else None)
        offset += len(line) + 1
    copied: set[int] = set()
    for one, two in zip(starts, starts[1:]):
        if one and two and one[0] != two[0]:
            copied |= {one[1], two[1]}
    first_pair = (
        len(starts) > 1
        and (one := starts[0]) is not None
        and one[1] in copied
        and (two := starts[1]) is not None
        and two[1] in copied
    )
    return first_pair, copied


def _first_token_label(
    line: str,
    text: str,
    index: dict[str, int],
    options: Sequence[str] | None,
    *,
    numeric: bool,
    truncated: bool,
    leading_word: bool = True,
) -> Parse | None:
    """CoRA's rule on the first line: a Parse (a slot, or INVALID when label-like but not shown, hedged or cut),
    or None when the first token is no label at all and the fallbacks should look further."""
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
    slot = _label_slot(token, index, decorated=decorated, alone=alone)
    if slot is None:
        label_shaped = (
            (token.isdigit() and len(token) <= 2)
            if numeric
            else (len(token) == 1 and token.isalpha() and (token.isupper() or decorated or alone))
        )
        if token == "I" and not decorated and after:
            return None  # "I think ...": the pronoun
        return Parse(None, "invalid_out_of_range") if label_shaped else None
    rest = line[line.find(token) + len(token) :]
    if _hedged(rest, index, slot):
        return Parse(None, "invalid_hedge")
    sentence = after and (after[0][:1].islower() if token in ("A", "I") and leading_word else after[0][:1].isalnum())
    if (token in ("A", "I") or not leading_word) and not decorated and sentence:
        # "A cat is a mammal ...", "I think ...": the word, unless the line goes on with this option's text
        # ("A False, False" is label A: no sentence). After an answer prefix, any letter: "Option A is wrong".
        said = _normalise(rest)
        if not (
            options
            and slot < len(options)
            and _normalise(options[slot])
            and (said + " ").startswith(_normalise(options[slot]) + " ")
        ):
            return None
    if truncated and _DANGLING.match(text[text.find(token) + len(token) :]):
        return Parse(None, "truncated")  # "A or" cut before the second label
    return Parse(slot, "first_token")


def _hedged(after: str, index: dict[str, int], slot: int) -> bool:
    """Whether the text right after a label names another shown label as an alternative: "A or B", "A, C",
    "A. Or maybe B?", "A (or possibly B)", "A, though it could be B"."""
    for pattern in (_HEDGE, _HEDGE_AFTER):
        hedge = pattern.match(after)
        if not hedge or not (hedge.group("label").isupper() or hedge.group("label").isdigit()):
            continue
        if pattern is _HEDGE_AFTER and hedge.group("label") in ("A", "I") and _WORD_AFTER.match(after[hedge.end() :]):
            continue  # "C. Perhaps I am wrong": the pronoun
        if index.get(hedge.group("label"), slot) != slot:
            return True
    return False


def _label_slot(token: str, index: dict[str, int], *, decorated: bool, alone: bool) -> int | None:
    if token in index:
        return index[token]
    # Lowercase "b" counts only where it cannot be an article or a word: alone on the line or decorated like "b)".
    if len(token) == 1 and token.islower() and token.upper() in index and (decorated or alone):
        return index[token.upper()]
    return None


def _settle(found: dict[int, set[int]], out_of_range: bool, hedged: bool) -> Parse | None:
    """The verdict of the matches of the strongest tier that has any: one slot, or INVALID."""
    if hedged:
        return Parse(None, "invalid_hedge")
    for tier in sorted(found):
        slots = found[tier]
        if len(slots) == 1:
            return Parse(next(iter(slots)), "")
        if slots:
            return Parse(None, "invalid_conflict")  # "the answer is A ... the answer is B"
    return Parse(None, "invalid_out_of_range") if out_of_range else None


def _label_of(label: str, after: str, index: dict[str, int], *, numeric: bool) -> int | str | None:
    """A matched label's slot; "out" for a label-shaped token that was not shown; None to ignore the match."""
    if label.islower() and not re.match(r"^(?:$|[\)\]\.:\*\n\"'])", after):
        return None  # "the answer is a bit ...": lowercase counts only as "a)" / "a." / alone
    label = label.upper()
    if label in index:
        return index[label]
    return "out" if (label.isdigit() if numeric else label.isalpha()) else None


def _phrase_slots(
    text: str,
    index: dict[str, int],
    options: Sequence[str] | None,
    *,
    numeric: bool,
    truncated: bool,
    skip: set[int],
    tiers: tuple[int, ...] = (_STRONG, _PLAIN),
) -> Parse | None:
    found: dict[int, set[int]] = {}
    out_of_range = hedged = cut = False
    for tier, pattern in _PHRASES:
        if tier not in tiers:
            continue
        for match in pattern.finditer(text):
            if match.start("label") in skip:
                continue  # a label of a copied option list
            after = text[match.end() :]
            slot = _label_of(match.group("label"), after, index, numeric=numeric)
            if slot is None:
                continue
            if isinstance(slot, str):  # "out"
                out_of_range = True
                continue
            if _hedged(after, index, slot):
                hedged = True  # "The answer is A or B"
            if truncated and _DANGLING.match(after):
                cut = True  # "The answer is A or" cut before the second label
                continue
            found.setdefault(tier, set()).add(slot)
    verdict = _settle(found, out_of_range and not found, hedged)
    if cut:  # a phrase cut after its label may have gone on "B or C": the verdict depends on the cut text
        return Parse(None, "truncated")
    return verdict


def _boxed_slots(
    text: str, index: dict[str, int], options: Sequence[str] | None, *, numeric: bool, truncated: bool, skip: set[int]
) -> Parse | None:
    """`\\boxed{B}`, `$\\boxed{\\text{C}}$`, `\\boxed{(B) Paris}`, `\\boxed{Paris}`."""
    found: set[int] = set()
    out_of_range = hedged = False
    for match in _BOXED.finditer(text):
        inner = match.group(1)
        while _LATEX_WRAP.search(inner):
            inner = _LATEX_WRAP.sub(r"\1", inner)
        inner = inner.strip()
        head = re.match(r"^[\(\[\*\s]*(?P<label>[A-Za-z]|\d{1,2})(?![\w'’])[\)\]\.\:\*]*", inner)
        slot = None
        if head:
            slot = _label_of(head.group("label"), inner[head.end() :], index, numeric=numeric)
            hedged |= isinstance(slot, int) and _hedged(inner[head.end() :], index, slot)  # \boxed{A, C}
        if slot is None and options:
            texts = [s for s, o in enumerate(options) if _normalise(o) and _normalise(o) == _normalise(inner)]
            slot = texts[0] if len(texts) == 1 else None
        if isinstance(slot, str):  # "out"
            out_of_range = True
        elif slot is not None:
            found.add(slot)
    return _settle({_STRONG: found}, out_of_range and not found, hedged)


def _normalise(text: str) -> str:
    return " ".join(text.casefold().split()).strip(_DECOR + " ")


def _option_text_slot(text: str, lines: Sequence[str], options: Sequence[str], *, truncated: bool) -> Parse | None:
    """The slot whose option text is the first line (or its first sentence, or what an answer phrase names),
    ignoring case and decoration: "Paris", "The answer is Paris.", "**Paris** is the correct answer"."""
    first = lines[0].strip()
    candidates = [first, first.split(". ")[0], _ANSWER_PREFIX.sub("", first.strip(_DECOR + " "))]
    candidates += [_TEXT_SUFFIX.sub("", c) for c in list(candidates)]
    for match in re.finditer(
        r"(?i)\b(?:the\s+)?(?:final\s+|correct\s+|right\s+)?answer\s*(?:is|would\s+be|:)\s*"
        r"(?:option\s+)?([^\n]+)",
        text,
    ):
        candidates += [match.group(1), match.group(1).split(". ")[0]]
    sentence = first.split(". ")[0]
    said = re.search(r"(?i)\b(?:is|are|was|it's|it’s)\s+([^.;,!?]+)[.!]?$", sentence)
    if said:  # "The capital of France is Paris."
        candidates.append(said.group(1))
    subject = re.match(r"(?i)^(.+?)\s+(?:is|are|was)\s+(?:the|a|an)\s", sentence)
    if subject and not re.search(r"(?i)\bnot\b|n't\b|n’t\b", sentence):  # "Jupiter is the largest planet."
        candidates.append(subject.group(1))
    targets = {_normalise(c) for c in candidates} - {""}
    norms = [_normalise(option) for option in options]
    slots = {slot for slot, norm in enumerate(norms) if norm and norm in targets}
    if not slots:
        return None
    if len(slots) > 1:
        return Parse(None, "invalid_conflict")  # two options named, or two slots with one text
    slot = slots.pop()
    if truncated and _normalise(text).endswith(norms[slot]) and not text.rstrip(" *").endswith((".", "!")):
        return Parse(None, "truncated")  # "Paris" cut: it may have been "Paris, Texas"
    return Parse(slot, "option_text")
