"""The docs are a manual: they say what is true now, not the history of how it came to be.

No page, test, comment or config names the internal work periods or issue numbers behind a change: a reader of the
project never saw them, so an issue's number or a numbered mutation run tells them nothing; the why is written out
instead, and the history lives in git and in the bench's results file (devtools/perf/results.jsonl). Addresses are
left out before the search: an issue of another project on GitHub (`https://github.com/owner/name/issues/12`) is a
public reference a reader can open. This file is left out too, since its examples name what it looks for.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# what a run's duration looks like after "run N" ("the default run 16 s", "runs 60 s"): a figure, not a history
_UNIT = r"(?:s|ms|min|h|x|%|seconds?|minutes?|hours?|times|jobs?|tests?|questions?|prompts?|processes|workers?)\b"
HISTORY = re.compile(
    r"\bsessions? \d+"  # a numbered work period
    r"|\bwork periods?\b"
    r"|\bissues? #?\d+"  # an issue number, also a list of them or one with its items
    r"|\(issue:|\bthe issue's\b"  # an issue named by its title or as "the issue"
    r"|\bmutation runs? \d+"
    rf"|\bruns? \d{{1,2}}[a-z]?\b(?!\s*{_UNIT})",  # a numbered run of a check ("run N", "runs Nb")
    re.IGNORECASE,
)
URL = re.compile(r"https?://\S+")


def tracked_text_files() -> list[Path]:
    """Every file git tracks here that is text (no NUL byte), this test's own file left out."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True)
    if listed.returncode != 0:  # not a git checkout (an unpacked archive): the files a reader would open
        names = [p.relative_to(REPO).as_posix() for p in REPO.rglob("*") if p.is_file() and ".git" not in p.parts]
    else:
        names = [name for name in listed.stdout.split("\0") if name]
    out = []
    for name in names:
        path = REPO / name
        if path.resolve() == Path(__file__).resolve() or not path.is_file():
            continue
        if b"\0" not in path.read_bytes()[:8192]:
            out.append(path)
    return out


def history_mentions(text: str) -> list[tuple[int, str]]:
    """(line number, what matched) for every mention of a work period or an issue number, addresses left out."""
    return [
        (number, match.group(0))
        for number, line in enumerate(text.splitlines(), 1)
        for match in HISTORY.finditer(URL.sub("", line))
    ]


def test_no_tracked_file_names_a_work_period_or_an_issue_number():
    files = tracked_text_files()
    assert any(p.name == "README.md" for p in files) and any(p.suffix == ".py" for p in files)
    found = [
        f"{path.relative_to(REPO)}:{number}: {what!r}"
        for path in files
        for number, what in history_mentions(path.read_text(encoding="utf-8", errors="replace"))
    ]
    assert not found, (
        "say why without the history (git keeps it; the bench's figures are in devtools/perf/results.jsonl):\n"
        + "\n".join(found)
    )


@pytest.mark.parametrize(
    "text",
    [
        "a test added in session {n}",
        "the bug class of issue {n}",
        "Issue {n} items 4 and 7",
        "issues {n}, 49 and 50's work",
        "(issue: data safety, item 5)",
        "8 is the issue's done-when",
        "what mutation run {n} found",
        "since run {n}, the weights",
        "runs {n}b and 14",
        "one work period later",
    ],
)
def test_each_kind_of_history_is_found(text):
    text = text.format(n=12)  # the number filled in here, so that this file names no work period itself
    assert history_mentions(text), text


@pytest.mark.parametrize(
    "text",
    [
        "the default run 16 s, a tracking server",
        "python -m src.ui still runs 60 s after Ctrl-C",
        "see https://github.com/someone/project/issues/1234 for their fix",
        "a pytest session fixture; the Ray session's logs",
        "an issue a user can hit",
        "run 10 jobs at once",
    ],
)
def test_figures_sessions_of_tools_and_other_projects_issues_are_not_history(text):
    assert not history_mentions(text), text
