"""The promises the docs make to a user, each with the test that guards it: read from the tests themselves.

A test that guards a promise carries `@pytest.mark.promise(PAGE, TEXT)`: PAGE is the page (README.md, docs/*.md or a
conf/ file) whose words make the promise, TEXT says it in one line. docs/testing.md's list is made from those marks,
so it cannot drift from the tests: `python -m tests.promises --write` rewrites it, `tests/test_promises.py` fails
when it differs.

    python -m tests.promises            # the list, on stdout
    python -m tests.promises --write    # docs/testing.md's list made anew
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "testing.md"
BEGIN = "<!-- promises: made by `python -m tests.promises --write`; edit the tests' marks, not this list -->"
END = "<!-- end of promises -->"


@dataclass(frozen=True, order=True)
class Promise:
    page: str  # where the promise is made: README.md, docs/NAME.md, conf/...
    text: str  # the promise, one line
    test: str  # tests/FILE.py::NAME (::CLASS::NAME for a method)
    line: int


def _promise_marks(decorators: list[ast.expr]) -> list[tuple[str, str]]:
    """(page, text) of each `pytest.mark.promise(page, text)` among a definition's decorators."""
    found = []
    for deco in decorators:
        if not isinstance(deco, ast.Call):
            continue
        name = ast.unparse(deco.func)
        if name not in ("pytest.mark.promise", "mark.promise"):
            continue
        args = [a.value for a in deco.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if len(args) != 2 or len(deco.args) != 2:
            raise ValueError(f"line {deco.lineno}: promise takes two literal strings, (page, text)")
        found.append((args[0], args[1]))
    return found


def _module_marks(tree: ast.Module) -> list[tuple[str, str]]:
    """A module-wide `pytestmark = pytest.mark.promise(...)` (or a list of marks) applies to each of its tests."""
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            value = node.value
            items = value.elts if isinstance(value, ast.List | ast.Tuple) else [value]
            return _promise_marks(list(items))
    return []


def promises_in(path: Path, root: Path = REPO) -> list[Promise]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    rel = path.relative_to(root).as_posix()
    found: list[Promise] = []

    def walk(nodes: list[ast.stmt], prefix: str, inherited: list[tuple[str, str]]) -> None:
        for node in nodes:
            if isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                walk(node.body, f"{prefix}{node.name}::", inherited + _promise_marks(node.decorator_list))
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test"):
                for page, text in inherited + _promise_marks(node.decorator_list):
                    found.append(Promise(page, text, f"{rel}::{prefix}{node.name}", node.lineno))

    walk(tree.body, "", _module_marks(tree))
    return found


def promises_in_tree(root: Path) -> list[Promise]:
    """Every promise mark of the test files below `root`, named relative to it."""
    return [p for path in sorted(root.rglob("test_*.py")) for p in promises_in(path, root)]


def collect() -> list[Promise]:
    """The project's promises, README first, then the manual's pages, then config comments."""
    promises = [Promise(p.page, p.text, f"tests/{p.test}", p.line) for p in promises_in_tree(REPO / "tests")]
    return sorted(promises, key=lambda p: (page_order(p.page), p.page, p.text, p.test))


def page_order(page: str) -> int:
    """README first, then the manual's pages, then config comments."""
    return 0 if page == "README.md" else 1 if page.startswith("docs/") else 2


def render(promises: list[Promise]) -> str:
    lines = [BEGIN, ""]
    rows: dict[tuple[str, str], list[str]] = {}  # (page, promise) -> its tests, in order
    for p in promises:
        rows.setdefault((p.page, p.text), []).append(p.test)
    current = None
    for (page, text), tests in rows.items():
        if page != current:
            if current is not None:
                lines.append("")
            current = page
            lines += [f"### {page}", "", "| promise | guarded by |", "|---|---|"]
        guards = "<br>".join(f"`{test}`" for test in tests)
        lines.append(f"| {text.replace('|', chr(92) + '|')} | {guards} |")
    lines += ["", f"{len(rows)} promises, guarded by {len(promises)} tests.", "", END]
    return "\n".join(lines)


def page_with(promises: list[Promise], page_text: str) -> str:
    """docs/testing.md with its list replaced by the one made from the marks."""
    start, end = page_text.index(BEGIN), page_text.index(END) + len(END)
    return page_text[:start] + render(promises) + page_text[end:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.promises", description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite docs/testing.md's list")
    args = parser.parse_args(argv)
    promises = collect()
    if args.write:
        PAGE.write_text(page_with(promises, PAGE.read_text(encoding="utf-8")), encoding="utf-8")
        print(f"docs/testing.md: {len(promises)} promises")
    else:
        print(render(promises))
    return 0


if __name__ == "__main__":
    sys.exit(main())
