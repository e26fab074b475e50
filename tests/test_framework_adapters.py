"""Private names of other libraries (Hydra, MLflow's error texts, transformers, lm-eval) are named in one adapter
module per library, each named in docs/development.md, each checking the installed version against the range it was
checked with when imported; no other module of src (or of the project's Hydra plugins) names another module's private
name."""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

from src.config import hydra_adapter

REPO = Path(__file__).resolve().parents[1]
ADAPTERS = {  # module -> the distribution whose private API it names
    "src.config.hydra_adapter": "hydra-core",
    "src.tracking.mlflow_adapter": "mlflow",
    "src.backends.hf.transformers_adapter": "transformers",
    "src.benchmarks.lm_eval_adapter": "lm-eval",
    "src.sweep.slurm_queue": "submitit",
}
# the search `grep -rn "_internal\|\._[a-z]" src`, less a class's own attributes (`self._x`, `cls._x`), plus
# `from module import _name`. A subclass's use of its base class's private attributes (`self._x` too) is found by
# `test_no_class_reads_a_private_attribute_of_another_librarys_base_class`.
PRIVATE = re.compile(r"_internal|(?<!self)(?<!cls)\._[a-z]|^\s*from \S+ import (.*, )?_[a-z]")


def _path(module: str) -> Path:
    return REPO / (module.replace(".", "/") + ".py")


def _runtime_modules() -> list[Path]:
    """Every module of the runtime package and of the project's Hydra plugins (wherever the plugins folder is)."""
    plugins = [p for p in (REPO / "hydra_plugins", REPO / "src" / "plugins") if p.is_dir()]
    return sorted(p for folder in (REPO / "src", *plugins) for p in folder.rglob("*.py"))


def test_private_names_appear_only_in_the_adapter_modules():
    adapters = {_path(m) for m in ADAPTERS}
    found = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path in _runtime_modules()
        if path not in adapters
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if PRIVATE.search(line)
    ]
    assert not found, "private names outside the adapter modules:\n" + "\n".join(found)
    # the pattern itself: what it must find and what it must leave
    assert PRIVATE.search("x = dataset._to_mlflow_entity()") and PRIVATE.search("import hydra._internal.hydra")
    assert PRIVATE.search("from devtools.perf.meter import REPO, _child_cpu_s")
    assert not PRIVATE.search("self._apply_overrides_to_config(extra, cfg)")
    assert not PRIVATE.search("from __future__ import annotations")


def _inherited_private_reads(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, name) of each `self._name` read in a class deriving from another library's class (a base imported from
    outside src and hydra_plugins) where the class itself never defines `_name` (a method, a class attribute or a
    `self._name = ...`): a private attribute of the library's base class."""
    external = {
        alias.asname or alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and not (node.module or "").startswith(("src", "hydra_plugins"))
        and node.level == 0
        for alias in node.names
    }
    found = []
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        bases = {
            b.id if isinstance(b, ast.Name) else getattr(b.value, "id", None)
            for b in cls.bases
            if isinstance(b, (ast.Name, ast.Attribute))
        }
        if not bases & external:
            continue
        defined = {n.name for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        defined |= {
            t.id
            for n in cls.body
            if isinstance(n, (ast.Assign, ast.AnnAssign))
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            if isinstance(t, ast.Name)
        }
        self_attrs = [
            n
            for n in ast.walk(cls)
            if isinstance(n, ast.Attribute)
            and isinstance(n.value, ast.Name)
            and n.value.id == "self"
            and n.attr.startswith("_")
            and not n.attr.startswith("__")
        ]
        defined |= {n.attr for n in self_attrs if isinstance(n.ctx, ast.Store)}
        found += [(n.lineno, n.attr) for n in self_attrs if isinstance(n.ctx, ast.Load) and n.attr not in defined]
    return found


def test_no_class_reads_a_private_attribute_of_another_librarys_base_class():
    adapters = {_path(m) for m in ADAPTERS}
    found = [
        f"{path.relative_to(REPO)}:{line}: self.{name}"
        for path in _runtime_modules()
        if path not in adapters
        for line, name in _inherited_private_reads(ast.parse(path.read_text()))
    ]
    assert not found, "a base class's private attributes outside the adapter modules:\n" + "\n".join(found)
    # the rule itself, on the adapter that fills submitit's watcher state
    watcher = {name for _, name in _inherited_private_reads(ast.parse(_path("src.sweep.slurm_queue").read_text()))}
    assert {"_info_dict", "_finished", "_registered"} <= watcher and "_from_queue" not in watcher


def test_every_adapter_is_named_in_the_developers_guide_with_its_range():
    guide = (REPO / "docs" / "development.md").read_text()
    for module in ADAPTERS:
        adapter = importlib.import_module(module)
        assert str(_path(module).relative_to(REPO)) in guide, f"{module} is not named in docs/development.md"
        assert adapter.ADAPTER == str(_path(module).relative_to(REPO))
        assert adapter.SUPPORTED in guide, f"{module}'s range {adapter.SUPPORTED} is not in docs/development.md"


def test_the_pinned_ranges_are_the_adapters_ranges():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    requirements = [*project["dependencies"], *project["optional-dependencies"]["bench"]]
    for module, distribution in ADAPTERS.items():
        pinned = [
            r.split(";")[0].split("#")[0].replace(" ", "")
            for r in requirements
            if re.match(rf"{re.escape(distribution)}\s*[<>=!~]", r)
        ]
        assert pinned, f"pyproject.toml does not pin {distribution}"
        supported = importlib.import_module(module).SUPPORTED
        assert pinned[0] == f"{distribution}{supported}", (module, pinned[0], supported)


def test_each_adapter_imported_with_its_library_outside_its_range_says_so_in_one_line():
    """Every adapter imported in a fresh process (a module imported twice in one would hand other modules a second
    copy of its classes), once with each library's version faked to 0.0.1 and once as installed (inside)."""
    imports = "; ".join(f"import {module}" for module in sorted(ADAPTERS))
    fake = (
        "import importlib.metadata as m; real = m.version; "
        f"m.version = lambda name: '0.0.1' if name in {sorted(ADAPTERS.values())!r} else real(name); "
    )
    seen = {}
    for label, code in (("outside", fake + imports), ("inside", imports)):
        proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=180)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == "", f"the warning belongs on stderr, stdout is data: {proc.stdout!r}"
        seen[label] = [line for line in proc.stderr.splitlines() if line.startswith("warning:")]
    expected = []
    for module in sorted(ADAPTERS):
        distribution, supported = ADAPTERS[module], importlib.import_module(module).SUPPORTED
        expected.append(
            f"warning: {distribution} 0.0.1 is outside {supported}, the versions whose private API "
            f"{_path(module).relative_to(REPO)} was checked with; pip install '{distribution}{supported}'"
        )
    assert sorted(seen["outside"]) == sorted(expected), "one line per adapter, naming its range and the install"
    assert seen["inside"] == []


def test_hydras_range_outside_and_inside():
    assert hydra_adapter.version_problem("1.3.2") is None and hydra_adapter.version_problem("1.3.9") is None
    for outside in ("1.2.0", "1.4.0", "2.0.0.dev1", "not-a-version"):
        line = hydra_adapter.version_problem(outside)
        assert line.startswith(f"warning: hydra-core {outside} is outside >=1.3.2,<1.4") and "\n" not in line
