"""The shape the code keeps: no line over 120 characters anywhere, pragma comments included (ruff's E501
passes a line whose overflow is a `# noqa` or `# type: ignore`), and no function in src/ or hydra_plugins/ over 80
lines, where a reader would lose its thread."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MAX_LINE = 120
MAX_FUNCTION = 80


def python_files(*roots: str) -> list[Path]:
    return sorted(p for root in roots for p in (REPO / root).rglob("*.py") if "__pycache__" not in p.parts)


def long_lines(paths: list[Path], limit: int = MAX_LINE, base: Path = REPO) -> list[str]:
    return [
        f"{path.relative_to(base)}:{number}: {len(line)} characters"
        for path in paths
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if len(line) > limit
    ]


def long_functions(paths: list[Path], limit: int = MAX_FUNCTION, base: Path = REPO) -> list[str]:
    return [
        f"{path.relative_to(base)}:{node.lineno}: {node.name} has {node.end_lineno - node.lineno + 1} lines"
        for path in paths
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > limit
    ]


def test_no_line_is_over_120_characters():
    assert not long_lines(python_files("src", "hydra_plugins", "devtools", "tests"))


def test_no_function_of_the_tool_is_over_80_lines():
    assert not long_functions(python_files("src", "hydra_plugins"))


def test_the_checks_find_what_they_look_for(tmp_path):
    """A planted long line (its overflow a pragma comment) and a planted 81-line function are both found."""
    body = "\n".join(f"    x{i} = {i}" for i in range(80))
    planted = tmp_path / "planted.py"
    planted.write_text(f"def f():\n{body}\n\n\ny = 1  # noqa: E501 {'-' * 120}\n", encoding="utf-8")
    assert long_functions([planted], base=tmp_path) == ["planted.py:1: f has 81 lines"]
    assert long_lines([planted], base=tmp_path) == ["planted.py:84: 140 characters"]  # after 81 lines and 2 blank
    assert long_functions([planted], limit=81, base=tmp_path) == []
