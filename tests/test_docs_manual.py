"""The docs are a manual: they say what is true now, not the history of how it came to be.

No page, test, comment or config names the internal work periods or issue numbers behind a change: a reader of the
project never saw them, so an issue's number or a numbered mutation run tells them nothing; the why is written out
instead, and the history lives in git and in the bench's results file (devtools/perf/results.jsonl). Addresses are
left out before the search: an issue of another project on GitHub (`https://github.com/owner/name/issues/12`) is a
public reference a reader can open. This file is left out too, since its examples name what it looks for.

The pages' prose (README.md, docs/*.md) names no date, no load average and no commit: a measured figure's machine,
date, load and command live in devtools/perf/results.jsonl and in the tables made from it between marker comments
(`python -m devtools.perf.tables --write`), as do CI's step times (`python -m devtools.ci_times LOG`); those tables
and the fenced code blocks are left out of the search.
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

DOC_PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# what dates a figure in prose: a day, a load average, a commit
DATED = re.compile(
    r"\b20\d\d-\d\d-\d\d\b"
    r"|\bload averages?\b"
    r"|\b(?:at |a )?load (?:of )?~?\d"  # "load 0.4", "at load 5-9", "load ~1"
    r"|\bcommits? [0-9a-f]{7,40}\b",
    re.IGNORECASE,
)
HEX = re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")
GENERATED = re.compile(r"<!-- [^\n]*?made by .*?<!-- end of [^\n]*?-->", re.S)  # tables a command writes
FENCE = re.compile(r"^\s*```.*?^\s*```[ \t]*$", re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]+`")


def prose(text: str) -> str:
    """A page without its generated tables, fenced blocks and code spans; each cut keeps its newlines, so that line
    numbers stay the page's."""
    for pattern in (GENERATED, FENCE, CODE_SPAN):
        text = pattern.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return text


def commits_named(words: set[str]) -> set[str]:
    """The words among `words` that name a commit of this repository (none outside a git checkout)."""
    if not words:
        return set()
    listed = subprocess.run(
        ["git", "cat-file", "--batch-check"],
        cwd=REPO,
        input="".join(f"{w}^{{commit}}\n" for w in sorted(words)),
        capture_output=True,
        text=True,
    )
    found = {line.split()[0] for line in listed.stdout.splitlines() if line.split()[1:2] == ["commit"]}
    return {w for w in words if any(sha.startswith(w) for sha in found)}


def dated_mentions(text: str) -> list[tuple[int, str]]:
    """(line number, what matched) for every date, load average or commit in a page's prose."""
    lines = prose(text).splitlines()
    found = [(n, m.group(0)) for n, line in enumerate(lines, 1) for m in DATED.finditer(URL.sub("", line))]
    hexes = {(n, m.group(0)) for n, line in enumerate(lines, 1) for m in HEX.finditer(URL.sub("", line))}
    named = commits_named({w for _, w in hexes})
    return sorted(found + [(n, w) for n, w in hexes if w in named])


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


@pytest.mark.promise(
    "docs/speed.md", "the pages' prose names no date, load or commit: the results file and its tables do"
)
def test_no_page_dates_a_figure_in_its_prose():
    found = [
        f"{page.relative_to(REPO)}:{number}: {what!r}"
        for page in DOC_PAGES
        for number, what in dated_mentions(page.read_text(encoding="utf-8"))
    ]
    assert not found, (
        "the docs describe the present: put the figure's machine, date, load and command in "
        "devtools/perf/results.jsonl and its table (`python -m devtools.perf.tables --write`), or leave them out:\n"
        + "\n".join(found)
    )


@pytest.mark.parametrize(
    "text",
    [
        "It takes 71 s (2026-11-27, on an Intel Xeon).",
        "measured at load average 1.2-1.6",
        "at load 0.4, nothing else running",
        "the same machine and day, load 1.3",
        "(load ~1)",
        "at commit a8cfb57 from a clean clone",
    ],
)
def test_each_way_of_dating_a_figure_is_found(text):
    assert dated_mentions(text), text


def test_a_commit_of_this_repository_is_found_and_a_run_id_is_not():
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("not a git checkout: no commit to name")
    # a short hash of digits alone reads as a number and is not taken for a commit (HEX): HEAD's shortest prefix of
    # seven or more characters that holds a letter
    full = head.stdout.strip()
    commit = full[: max(7, 1 + min(full.index(c) for c in "abcdef" if c in full))]
    assert dated_mentions(f"the figure measured on {commit} here") == [(1, commit)]
    assert dated_mentions("run 2ddda5fe67c24cf89c83f701acb0473d, a prompt hash 77d0e2aa") == []


def test_generated_tables_fenced_blocks_and_code_spans_are_not_prose():
    begin = "<!-- perf-table speed: made by `python -m devtools.perf.tables --write` from the results file -->"
    page = (
        f"{begin}\n| x | 2026-11-27, load 0.4 |\n<!-- end of perf-table speed -->\n"
        "```text\nINFO 2026-11-27 12:00\n```\nan example `load 3` in a span\n"
        "<!-- ci-times: made by `python -m devtools.ci_times LOG` -->\nAMD EPYC, 2026-11-28\n<!-- end of ci-times -->\n"
        "and here, 2026-12-01\n"
    )
    assert dated_mentions(page) == [(11, "2026-12-01")], "only the last line is prose; line numbers are the page's"


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
