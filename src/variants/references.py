"""Options that refer to other options ("All of the above", "Both A and B", "Neither (a) nor (b)") and
duplicate option texts: what docs/metrics.md's validity rules need to know about a question.

Two kinds of reference:

- `above`: "all / none / both / neither / any of the above / these / them / those / the options", "All the
  above", "None of these answers", and the bare "Both", "Neither", "All". It refers to the other options
  as a block: it stays in the last displayed slot(s) and needs every option it covers shown.
  "... of the above" covers the options before it; "... of these/them" (and bare words) cover every other
  option that is not itself such a block reference.
- `letters`: an option made only of option labels and connectives ("A and B", "both A and C", "neither A
  nor B", "A, B, and C", "A & B", "A or B", "only A", "all except C", "1 and 2", "(a) and (b)",
  "Both (a) and (b)"). `refs` are the original option indices it names (A -> 0 in file order, 1 -> 0 for
  numbers). Conservative: "A. Lincoln" or "Vitamin A and B12" are not references; neither is a label
  list when every option is one (they name statements in the question), when the labels are enumerated in
  the question text ("a) ... b) ..."), when a label names a missing option, the option itself or another
  reference, when a sibling option has the same "x and y" shape with other tokens ("B6 and B12": vitamins,
  not labels), or, for numbers, when another option holds digits (roots "1 and 0.5").

`none_like` marks options that already say "none": "None of the above", "None of these", "Neither of
them", "Neither A nor B", and the bare "None" (which refers to nothing, so its kind is None).

>>> q = Question(id="q", question="?", options=("x", "y", "Both A and B", "None of the above"), answer=2)
>>> [(r.kind, sorted(r.refs), r.none_like) for r in option_refs(q)]
[(None, [], False), (None, [], False), ('letters', [0, 1], False), ('above', [0, 1, 2], True)]
>>> option_refs(Question(id="v", question="?", options=("A and C", "B6 and B12", "B6 and D", "B12 and E"),
...                      answer=1))[0].kind
>>> duplicate_option_groups(Question(id="d", question="?", options=("Paris", "Rome", " Paris", "Oslo"), answer=1))
[(0, 2)]
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

from src.core.questions import Question, duplicate_option_groups

ABOVE = "above"
LETTERS = "letters"
NEGATIVE = frozenset({"none", "neither"})  # quantifiers that say no referred option is right

_WS = re.compile(r"\s+")
_TRAILING = re.compile(r"[\s.!;:]+$")
_LEADING_LABEL = re.compile(r"^\(?[a-j][).]\s+")  # "d)\tnone of the above": a label left inside the text

# "... of the above" and friends. group q = quantifier, group w = what it refers to.
_NOUN = r"(?:options?|answers?|choices?|statements?|responses?|alternatives?)"
_TAIL = (
    r"(?:\s+" + _NOUN + r")?"
    r"(?:\s+(?:given|listed|mentioned|here))?"
    r"(?:\s+(?:is|are)\s+(?:all\s+)?(?:correct|true|false|right|valid|appropriate|applicable|possible"
    r"|a\s+true\s+statement|true\s+statements|valid\s+conclusions))?"
)
_ABOVE_START = (
    r"^(?P<q>all|none|both|neither|any|either)(?:\s+(?:two|three|2|3))?(?:\s+of)?(?:\s+the)?\s+"
    r"(?P<w>above(?:[\s-]+mentioned)?|aforementioned|these|them|those|below|following|"
    + _NOUN
    + r"(?:\s+(?:given|listed|mentioned|above|here))?)"
)
_ABOVE_RE = re.compile(_ABOVE_START + _TAIL + r"$")
# The sentence may go on ("All of the above were among the causes", "None of these for the moon does not
# rotate"): "the above" and "these" point at the listed options whatever follows. "them"/"those" with more
# words do not ("Of the ways of escaping ..., Hare claims: none of them are successful" speaks of the
# question's subject), nor do "the following"/"the statements ..." (the question's own list).
_ABOVE_OPEN = re.compile(_ABOVE_START + r"(?=\W|$)")
_OPEN_WORDS = ("above", "aforementioned", "these")
_BARE = {
    "all": "all",
    "both": "both",
    "neither": "neither",
    "all three": "all",
    "all four": "all",
    "both equally": "both",
}
_NONE_BARE = {"none", "none of it"}
# "all three structures" beside three single options: the options. Not when the others are combinations
# ("Only the manufacturer of the car and the retailer" ... "All three defendants": the question's three) or
# the question names the noun ("All three steps are endothermic").
_COUNTED = re.compile(r"^all\s+(?P<n>three|four|3|4)\s+(?P<noun>[a-z]+?)s?$")
_COUNT = {"three": 3, "four": 4, "3": 3, "4": 4}
_COMBINATION = re.compile(r"\b(?:and|only|both)\b", re.I)

# Letter references: labels joined by connectives, optional prefix and suffix words.
_LABEL = r"\(?(?:[a-z]|[1-9])\)?\.?(?!\w)"
_SEP = r"(?:\s*,\s*(?:and|or)\s+|\s*,\s*|\s+(?:and|or|nor)\s+|\s*&\s*|\s*/\s*|\s+)"
_PREFIX = (
    r"(?P<p>both|neither|either|only|all\s+except|all\s+but|all\s+of|any\s+of|except)?\s*"
    r"(?:(?:options?|choices?|answers?)\s+)?"
)
_SUFFIX = r"(?P<s>\s+only|\s+both|\s+above|\s+are\s+(?:correct|true|right)|\s+is\s+(?:correct|true|right))?"
# The sentence may go on ("(A) and (B) both in the same way", "Both A and C are correct"): `rest`.
_LETTERS_RE = re.compile(
    r"^"
    + _PREFIX
    + r"(?P<labels>"
    + _LABEL
    + r"(?:"
    + _SEP
    + _LABEL
    + r")*)"
    + _SUFFIX
    + r"(?P<rest>(?:\s*[,;:—–]\s*|\s+)\S.*)?$",
    re.I,
)
# "All of (a) to (c)", "any of 1-3": a range of labels, read as the list it spans
_RANGE = re.compile(
    r"^((?:all|any)(?:\s+of)?\s+(?:(?:options?|choices?|answers?)\s+)?)"
    r"\(?([a-z]|[1-9])\)?\s*(?:-|–|to|through)\s*\(?([a-z]|[1-9])\)?(?!\w)",
    re.I,
)
_LABEL_TOKEN = re.compile(r"(?<!\w)\(?([a-z]|[1-9])\)?\.?(?!\w)", re.I)
_CONNECTIVE = re.compile(r"\b(?:and|or|nor)\b|&", re.I)
_SHORT_PAIR = re.compile(r"^[\w.+\-−–]{1,5}(?:(?:\s*,\s*)?(?:\s*&\s*|\s+(?:and|or|nor)\s+)[\w.+\-−–]{1,5})+$", re.I)
_ROMAN = re.compile(r"(?<!\w)(?:II|III|IV)(?!\w)")
_DIGIT = re.compile(r"\d")


@dataclass(frozen=True)
class OptionRef:
    """What one option says about the others. `kind` None: an ordinary option (maybe `none_like`, "None")."""

    kind: str | None = None  # "above" | "letters" | None
    refs: frozenset[int] = frozenset()  # original option indices it names / covers
    none_like: bool = False
    quantifier: str | None = None  # all | none | both | neither | any | and | or | only | except
    positional: bool = False  # "... of the above": covers the options before it (not "these")


PLAIN = OptionRef()


def _norm(text: str) -> str:
    text = _WS.sub(" ", str(text)).strip().strip("\"'“”‘’").strip()
    return _TRAILING.sub("", text)


def _head(text: str, separators: str) -> str | None:
    """The part before a clause that follows a reference ("None of the above; Cohen holds that ..."), or None."""
    m = re.match(rf"^(.+?)\s*[{separators}]\s+\S", _norm(text))
    return m.group(1) if m else None


def _above_form(text: str) -> tuple[str, bool] | None:
    """(quantifier, positional) of an "... of the above"-style text, or None."""
    found = _above_phrase(text)
    if found is None and (head := _head(text, ";,:—–")) is not None:
        found = _above_phrase(head)
    return found


def _above_phrase(text: str) -> tuple[str, bool] | None:
    plain = _LEADING_LABEL.sub("", _norm(text))
    low = plain.casefold()
    if low in _BARE:  # a bare "Both" means "both of the above"; "ALL" is a leukaemia, not a reference
        return (_BARE[low], True) if not plain.isupper() else None
    m = _ABOVE_RE.match(low)
    if not m and (m := _ABOVE_OPEN.match(low)) and not m.group("w").startswith(_OPEN_WORDS):
        m = None
    if not m:
        return None
    word, quantifier = m.group("w"), m.group("q")
    if low.endswith(" false") and quantifier in ("all", "none"):  # "All choices are false" says none is right
        quantifier = "none" if quantifier == "all" else "all"
    return quantifier, word.startswith("above") or word == "aforementioned"


class _Letters(NamedTuple):
    quantifier: str
    idx: tuple[int, ...]  # named indices, maybe out of range
    numeric: bool
    tokens: tuple[str, ...]  # the labels as written
    open: bool  # more words follow the label list


def _letters_form(text: str) -> _Letters | None:
    """What a label list at the start of `text` names, or None."""
    found = _letters_phrase(text)
    if found is None and (head := _head(text, ";:—")) is not None:
        found = _letters_phrase(head)
    return found


def _spelled_range(m: re.Match[str]) -> str:
    lead, first, last = m.group(1, 2, 3)
    if first.isdigit() != last.isdigit() or first.isupper() != last.isupper() or first >= last:
        return m.group(0)
    return lead + ", ".join(chr(c) for c in range(ord(first), ord(last) + 1))


def _letters_phrase(text: str) -> _Letters | None:
    t = _RANGE.sub(_spelled_range, _norm(text))
    m = _LETTERS_RE.match(t)
    if not m:
        return None
    prefix = _WS.sub(" ", (m.group("p") or "").casefold())
    suffix = (m.group("s") or "").strip().casefold()
    labels_text = m.group("labels")
    if not (_CONNECTIVE.search(labels_text) or prefix or suffix == "only"):
        return None  # "A", "a, c, d, b": a bare label or a comma list is not a reference
    more = m.group("rest") is not None
    if more and not (_CONNECTIVE.search(labels_text) or "," in labels_text):
        return None  # "Only a single virus", "both a molten core and ...": an article, not a label
    tokens = [tok for tok in _LABEL_TOKEN.findall(labels_text)]
    if not tokens:
        return None
    numeric = tokens[0].isdigit()
    if any(tok.isdigit() != numeric for tok in tokens):
        return None
    if not numeric and len({tok.isupper() for tok in tokens}) > 1:
        return None  # "A and b": mixed case is not a label list
    if numeric:
        idx = tuple(int(tok) - 1 for tok in tokens)
    else:
        idx = tuple(ord(tok.casefold()) - ord("a") for tok in tokens)
    if len(set(idx)) != len(idx):
        return None
    if "nor" in labels_text.casefold().split() or prefix == "neither":
        quantifier = "neither"
    elif prefix in ("all except", "all but", "except"):
        quantifier = "except"
    elif prefix == "only" or suffix == "only" and len(idx) == 1:
        quantifier = "only"
    elif re.search(r"\bor\b", labels_text, re.I) or prefix in ("either", "any of"):
        quantifier = "or"
    else:
        quantifier = "and"
    if len(idx) == 1 and quantifier not in ("only", "except"):
        return None
    return _Letters(quantifier, idx, numeric, tuple(tokens), more)


def _named_in_stem(stem: str, tokens: tuple[str, ...]) -> bool:
    """The question uses these capital letters as names ("Two events A and B ...", "two athletes, A and B")."""
    return all(tok.isupper() and re.search(rf"(?<![\w(]){tok}(?![\w)])", stem) for tok in tokens)


def _enumerated_in_stem(stem: str, tokens: tuple[str, ...]) -> bool:
    """The question text lists every one of these labels as an item marker ("a) ...", "(1) ...", "2. ...")."""

    def listed(tok: str) -> bool:
        t = re.escape(tok)
        if tok.isupper():
            return re.search(rf"(?:^|[\s\[])\({t}\)|(?:^|\n)\s*{t}[.)]\s", stem) is not None
        return re.search(rf"(?:^|[\s\[(])\(?{t}[).]\s*\S", stem) is not None

    return all(listed(tok) for tok in tokens)


@lru_cache(maxsize=4096)
def _analyse(options: tuple[str, ...], stem: str) -> tuple[OptionRef, ...]:
    n = len(options)
    above = {i: f for i, text in enumerate(options) if (f := _above_form(text))}
    for i, text in enumerate(options):
        m = _COUNTED.match(_norm(text).casefold())
        if (
            m
            and i not in above
            and _COUNT[m.group("n")] == n - 1
            and not re.search(rf"\b{m.group('noun')}", stem, re.I)
            and not any(_COMBINATION.search(o) for j, o in enumerate(options) if j != i)
        ):
            above[i] = ("all", True)
    letters = {}
    for i, text in enumerate(options):
        if i in above:
            continue
        found = _letters_form(text)
        if found:
            letters[i] = found
    candidates = set(above) | set(letters)
    accepted: dict[int, tuple[str, tuple[int, ...]]] = {}
    if len(candidates) < n:  # when every option is a label list, they name the question's statements
        for i, (quantifier, idx, numeric, tokens, more) in letters.items():
            if any(j < 0 or j >= n or (j in candidates and j != i) for j in idx) or set(idx) <= {i}:
                continue  # a missing option, another reference, or only itself ("1 only": a value)
            if (numeric or tokens[0].islower()) and _enumerated_in_stem(stem, tokens):
                continue
            if more and _named_in_stem(stem, tokens):
                continue  # "A and B must be mutually exclusive": events A and B of the question
            others = [options[j] for j in range(n) if j not in candidates]
            if any(_SHORT_PAIR.match(_norm(o)) for o in others):
                continue  # "B6 and B12" beside "A and C": the labels are content
            if numeric and any(_DIGIT.search(o) and len(_norm(o)) <= 15 for o in others):
                continue  # "1 and 2" beside "0.5" or "1 and -3": numbers are the content
            if any(_ROMAN.search(o) for o in options):
                continue  # "I only", "I and III": statements of the question
            if quantifier == "except":  # "all except C" speaks of every other option
                idx = tuple(j for j in range(n) if j != i and j not in candidates)
            accepted[i] = (quantifier, idx)
    if above:  # a bare "None" beside a block reference ("Both", "None") is part of the block
        above.update(
            {
                i: ("none", True)
                for i, text in enumerate(options)
                if i not in above and i not in accepted and _norm(text).casefold() in _NONE_BARE
            }
        )
    block = set(above)
    out = []
    for i, text in enumerate(options):
        if i in above:
            quantifier, positional = above[i]
            covered = [j for j in range(n) if j not in block and (j < i if positional else j != i)]
            out.append(OptionRef(ABOVE, frozenset(covered), quantifier in NEGATIVE, quantifier, positional))
        elif i in accepted:
            quantifier, idx = accepted[i]
            out.append(OptionRef(LETTERS, frozenset(idx), quantifier == "neither", quantifier))
        elif _norm(text).casefold() in _NONE_BARE:
            out.append(OptionRef(None, frozenset(), True))
        else:
            out.append(PLAIN)
    return tuple(out)


def option_refs(question: Question) -> tuple[OptionRef, ...]:
    """One OptionRef per option of `question`, in file order."""
    return _analyse(tuple(question.options), str(question.question))


def has_option_refs(question: Question) -> bool:
    """Whether some option refers to the others (kind above or letters; a bare "None" does not)."""
    return any(r.kind for r in option_refs(question))


__all__ = ["ABOVE", "LETTERS", "NEGATIVE", "OptionRef", "duplicate_option_groups", "has_option_refs", "option_refs"]
