"""The import graph of the project's modules: layers as folders, imports flowing downwards only, no circle.

The modules are the tool's (src/), its Hydra plugins (hydra_plugins/, installed with it) and the developer tools
(devtools/, run from a clone and not installed: they may import the tool, the tool never imports them).

Read with `ast` from the source (module-level, function-local and `if TYPE_CHECKING:` imports: a type hint's import
is a dependency too, and a circle once hid behind one), so it needs no import of the project and costs
~0.3 s. `test_the_checks_find_a_planted_circle_and_upward_import` plants both in a module set of its own.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROOTS = ("src", "hydra_plugins", "devtools")  # the project's top-level packages (hydra_plugins: a namespace)
DEVTOOLS = "devtools"

# The layers, highest first: a module may import its own layer's modules and any lower layer's, never a higher
# one's. A module belongs to the layer of the longest prefix that names it. The metrics sit below answering:
# they are pure functions of records, and adaptive repetitions stop by the SURE rule's arithmetic
# (src/metrics/guessing.py); the report (src/compare, src/ingest) reads runs, so it sits above tracking; what a person
# sees of a job (src/presentation: the closing block, a run's description, the MLflow UI in a browser) names tracking's
# tags and links, and the job, the sweep and the commands show it, so it sits between them. The developer
# tools are commands too; the Hydra plugins (the sweeper, the launchers) orchestrate a sweep's jobs.
LAYERS = (
    (
        "commands",
        (
            "src.run",
            "src.export",
            "src.data",
            "src.catalog",
            "src.plan",
            "src.assess",
            "src.sync",
            "src.ui",
            "src.recheck",
            "src.compare.__main__",
            "src.ingest.__main__",
            "src.cli",
            "devtools",
            "devtools.perf",
            "devtools.ui_check",
            "devtools.ci_times",
            "devtools.mutation",
        ),
    ),
    ("orchestration", ("src.job", "src.sweep", "hydra_plugins")),
    ("report", ("src.compare", "src.ingest")),
    ("config", ("src.config",)),
    ("presentation", ("src.presentation",)),
    ("tracking", ("src.tracking",)),
    ("answering", ("src.answering",)),
    ("measures", ("src.metrics",)),
    ("domain", ("src.answer_formats", "src.backends", "src.benchmarks", "src.variants")),
    ("nouns", ("src.core",)),
    ("common", ("src.common", "src")),
)
# What every command shares (the `mcq` console script, the tracking flags, exit codes): the one module of the
# commands layer that the other commands import. Any other piece two commands share lives in a lower layer.
COMMANDS_SHARED = "src.cli"
LOCAL_REASON = "local:"  # a function-local import of a project module says why on its line: `# local: loads torch`


def layer_of(module: str) -> int:
    """Index into LAYERS of `module` (its longest matching prefix); -1 when no layer names it."""
    best, length = -1, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > length:
                best, length = index, len(prefix)
    return best


def modules(repo: Path = REPO) -> dict[str, tuple[Path, bool]]:
    """Every module of the project (ROOTS under `repo`): dotted name -> (file, is a package's __init__)."""
    found = {}
    for path in sorted(p for root in ROOTS if (repo / root).is_dir() for p in (repo / root).rglob("*.py")):
        parts = list(path.relative_to(repo).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


def imports(known: dict[str, tuple[Path, bool]]):
    """(importer, imported project module, line, function-local?, the import's source lines), for every import
    of a project module in the project's modules (a wrapped import's comment may stand on its last line)."""
    for module, (path, is_package) in known.items():
        text = path.read_text()
        tree = ast.parse(text)
        lines = text.splitlines()
        in_function = {
            id(inner)
            for fn in ast.walk(tree)
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
            for inner in ast.walk(fn)
        }
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = module.split(".") if is_package else module.split(".")[:-1]
                    base = base[: len(base) - node.level + 1]
                    stem = ".".join(base + ([node.module] if node.module else []))
                else:
                    stem = node.module or ""
                targets = [f"{stem}.{alias.name}" if f"{stem}.{alias.name}" in known else stem for alias in node.names]
            for target in dict.fromkeys(targets):
                while target and target not in known:
                    target = target.rpartition(".")[0]
                if target and target != module and target.split(".")[0] in ROOTS:
                    source = "\n".join(lines[node.lineno - 1 : node.end_lineno])
                    yield module, target, node.lineno, id(node) in in_function, source


@pytest.fixture(scope="module")
def graph():
    known = modules()
    return known, list(imports(known))


def test_every_module_has_a_layer(graph):
    known, _ = graph
    homeless = [m for m in known if layer_of(m) < 0]
    assert not homeless, f"modules no layer names (add their folder to LAYERS in {__file__}): {homeless}"


def upward_imports(edges) -> list[str]:
    """The imports from a lower layer to a higher one, one line each."""
    return [
        f"{a}:{line} imports {b} ({LAYERS[layer_of(a)][0]} -> {LAYERS[layer_of(b)][0]})"
        for a, b, line, _, _ in edges
        if layer_of(b) < layer_of(a)
    ]


def test_no_import_goes_up_a_layer(graph):
    _, edges = graph
    upward = upward_imports(edges)
    assert not upward, "imports from a lower layer to a higher one:\n" + "\n".join(upward)


def command_of(module: str) -> str | None:
    """The command (its prefix in the commands layer: `devtools.perf` for every module of devtools/perf/) a module
    belongs to; None outside the commands layer."""
    if layer_of(module) != 0:
        return None
    return max((prefix for prefix in LAYERS[0][1] if module == prefix or module.startswith(prefix + ".")), key=len)


def test_no_command_imports_another_command(graph):
    """A command imports no other command (only `COMMANDS_SHARED`): what two commands share moves below them."""
    _, edges = graph
    crossing = [
        f"{a}:{line} imports {b}"
        for a, b, line, _, _ in edges
        if command_of(a) and command_of(b) and command_of(a) != command_of(b) and b != COMMANDS_SHARED
    ]
    assert not crossing, "a command imports another command:\n" + "\n".join(crossing)


def import_circle(known, edges) -> list[str] | None:
    """One circle of imports (its modules, the first again at the end), or None."""
    out: dict[str, set[str]] = {m: set() for m in known}
    for a, b, *_ in edges:
        out[a].add(b)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(out[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(known):
        if start not in state and (circle := visit(start)):
            return circle
    return None


def test_no_import_circle(graph):
    circle = import_circle(*graph)
    assert circle is None, "import circle: " + " -> ".join(circle or [])


def test_the_checks_find_a_planted_circle_and_upward_import(tmp_path):
    """A module set of its own with one circle (through a function-local import and a TYPE_CHECKING one, the way
    answering/adaptive.py and trials.py once hid theirs) and one import from the nouns up to the measures: both found,
    and nothing else."""
    files = {
        "src/__init__.py": "",
        "src/answering/__init__.py": "",
        "src/answering/loop.py": "def run():\n    from src.answering.rounds import rounds  # local: slow\n",
        "src/answering/rounds.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .loop import run\n",
        "src/core/__init__.py": "",
        "src/core/noun.py": "from src.metrics.measure import score\n",
        "src/metrics/__init__.py": "",
        "src/metrics/measure.py": "from src.core import noun\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    known = modules(tmp_path)
    edges = list(imports(known))
    assert import_circle(known, edges) in (
        ["src.answering.loop", "src.answering.rounds", "src.answering.loop"],
        ["src.core.noun", "src.metrics.measure", "src.core.noun"],
    )
    assert upward_imports(edges) == ["src.core.noun:1 imports src.metrics.measure (nouns -> measures)"]
    (tmp_path / "src/metrics/measure.py").write_text("")  # the second circle cut: the first is still found
    assert import_circle(known, list(imports(known))) == [
        "src.answering.loop",
        "src.answering.rounds",
        "src.answering.loop",
    ]


def test_function_local_imports_of_the_project_say_why(graph):
    """A project import inside a function hides the dependency graph: kept only where the module it loads is slow to
    import (torch, pandas, mlflow, ...) for callers that never need it, and then it says so on its line."""
    _, edges = graph
    silent = sorted(
        {
            f"{a}:{line}: {text.splitlines()[0].strip()}"
            for a, _, line, local, text in edges
            if local and not any(LOCAL_REASON in row.partition("#")[2] for row in text.splitlines())
        }
    )
    assert not silent, f"function-local project imports without a `# {LOCAL_REASON} why` comment:\n" + "\n".join(silent)


def test_the_checks_see_what_they_check():
    """The graph reader on a known shape: a function-local import, and no import back (the answering circle
    cut: both modules import src/answering/items.py)."""
    known = modules()
    edges = {(a, b, local) for a, b, _, local, _ in imports(known)}
    assert ("src.answering.trials", "src.answering.adaptive", True) in edges
    assert not any(a == "src.answering.adaptive" and b == "src.answering.trials" for a, b, _ in edges)
    assert {
        ("src.answering.adaptive", "src.answering.items", False),
        ("src.answering.trials", "src.answering.items", False),
    } <= edges
    assert not any(a.startswith("src.backends") and b.startswith("src.answer_formats") for a, b, _ in edges)
    assert (
        layer_of("src.run")
        < layer_of("src.job.runner")
        < layer_of("src.presentation.closing")
        < layer_of("src.tracking.store")
        < layer_of("src.common.errors")
    )
    # what a person sees reads tracking's tags and links, and the job shows it: the presentation between them
    assert {
        ("src.job.runner", "src.presentation.closing", False),
        ("src.presentation.description", "src.tracking.review", False),
    } <= edges
    assert layer_of("src.presentation.browser") == layer_of("src.presentation.description") != layer_of("src.tracking")
    assert layer_of("src.variants.cora") < layer_of("src.core.variant")  # the generators above the nouns they make
    assert command_of("devtools.perf.meter") == "devtools.perf"
    assert command_of("src.compare.__main__") == "src.compare.__main__"
    assert command_of("src.ui") == "src.ui" != command_of("devtools.ui_check")
    assert command_of("src.compare.report") is None
    assert layer_of("hydra_plugins.mcq_consistency_sweeper") == layer_of("src.sweep.job")
    assert ("devtools.perf.__main__", "devtools.perf.meter", False) in edges  # the developer tools are read too
    assert ("hydra_plugins.mcq_slurm_launcher", "src.sweep.slurm_queue", True) in edges  # and the plugins


def test_the_tool_imports_no_developer_tool(graph):
    """devtools/ is not installed (pyproject.toml): the tool and its plugins run without it, so none imports it."""
    _, edges = graph
    wrong = [
        f"{a}:{line} imports {b}"
        for a, b, line, _, _ in edges
        if b.split(".")[0] == DEVTOOLS and a.split(".")[0] != DEVTOOLS
    ]
    assert not wrong, "the tool imports a developer tool (move what both need into src/):\n" + "\n".join(wrong)


def test_the_installed_packages_are_the_tool_and_its_plugins():
    """The distribution holds src and hydra_plugins (Hydra finds the sweeper and launchers in the installed
    namespace package); the developer tools stay in the clone."""
    import tomllib

    include = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    assert sorted(include) == ["hydra_plugins*", "src*"]
    assert not (REPO / "hydra_plugins" / "__init__.py").exists()  # a namespace shared with the installed plugins
