"""`python -m src.catalog [benchmarks|variants|models|prompts|scoring|metrics]`: what the tool can run and measure.

One line each, read from where each thing is defined, so the list cannot drift from the code: benchmarks,
variant sets, models and prompts from the first comment of their file in `conf/`, scoring modes from
`src/core/validity.py`, metrics from the tables of `docs/metrics.md` (formula and paper there).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from src.cli import entry
from src.core.validity import DESCRIPTIONS, SCORING_MODES

REPO = Path(__file__).resolve().parents[1]
CONF = REPO / "conf"
METRICS_DOC = REPO / "docs" / "metrics.md"
GROUPS = ("benchmarks", "variants", "models", "prompts")
FOLDER = {"benchmarks": "benchmark", "variants": "variants", "models": "model", "prompts": "prompt"}
SECTIONS = (*GROUPS, "scoring", "metrics")


def first_comment(path: Path) -> str:
    """The leading comment of a config file as one line ('' when it has none).

    >>> import tempfile
    >>> f = Path(tempfile.mkdtemp()) / "x.yaml"
    >>> _ = f.write_text("# One thing,\\n# and another.\\nname: x  # not this\\n")
    >>> first_comment(f)
    'One thing, and another.'
    """
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        lines.append(line.lstrip("#").strip())
    return " ".join(lines)


def group_entries(section: str) -> list[tuple[str, str]]:
    """(choice, description) for each config file of a group, in name order; bases (`_bases/`) left out."""
    return [(p.stem, first_comment(p)) for p in sorted((CONF / FOLDER[section]).glob("*.yaml"))]


def scoring_entries() -> list[tuple[str, str]]:
    return [(mode, DESCRIPTIONS[mode]) for mode in SCORING_MODES]


def metric_entries(doc: Path = METRICS_DOC) -> list[tuple[str, str]]:
    """(names, meaning) for each row of the metric tables of docs/metrics.md (the tables whose header starts
    with `name`): the backticked names of the first cell, and the last cell.

    >>> import tempfile
    >>> f = Path(tempfile.mkdtemp()) / "m.md"
    >>> _ = f.write_text("| name | meaning |\\n|---|---|\\n| `a`, `b` | both |\\n\\n"
    ...                  "| `variants=` | x |\\n| `cora` | y |\\n")
    >>> metric_entries(f)
    [('a, b', 'both')]
    """
    out, in_metric_table = [], False
    for line in doc.read_text(encoding="utf-8").splitlines():
        if not line.startswith("|"):
            in_metric_table = False
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == "name":
            in_metric_table = True
        elif in_metric_table and cells[0].startswith("`"):
            out.append((", ".join(re.findall(r"`([^`]+)`", cells[0])), cells[-1]))
    return out


def entries(section: str) -> list[tuple[str, str]]:
    if section in GROUPS:
        return group_entries(section)
    return scoring_entries() if section == "scoring" else metric_entries()


def render(sections: tuple[str, ...] = SECTIONS) -> str:
    blocks = []
    for section in sections:
        rows = entries(section)
        width = min(max(len(name) for name, _ in rows), 40)
        key = {
            "benchmarks": "benchmark=",
            "variants": "variants=",
            "models": "model=",
            "prompts": "prompt=",
            "scoring": "scoring=",
        }.get(section, "")
        title = f"{section} ({key}...)" if key else f"{section} (definitions: docs/metrics.md)"
        blocks.append("\n".join([title, *(f"  {name:<{width}}  {text}" for name, text in rows)]))
    return "\n\n".join(blocks)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m src.catalog", description=__doc__.splitlines()[0])
    parser.add_argument(
        "sections",
        nargs="*",
        choices=[[], *SECTIONS],
        metavar="SECTION",
        help=f"one or more of {', '.join(SECTIONS)} (default: all)",
    )
    args = parser.parse_args(argv)
    print(render(tuple(args.sections) or SECTIONS))
    return 0


if __name__ == "__main__":
    entry(main)
