"""`python -m devtools.mutation`: mutmut (3.8) over src/ and hydra_plugins/, judged by the fast tier, and
docs/mutation.md's table made from its results.

    python -m devtools.mutation run                        # every mutant not yet judged, then the table
    python -m devtools.mutation run "src.backends.*"       # mutmut's own selection: mutant names, globs allowed
    python -m devtools.mutation table                      # the table again from mutants/*.meta, nothing run
    mutmut results / mutmut show NAME / mutmut browse      # mutmut's own views of the same results

What mutmut mutates, which tests it runs and what it copies into `mutants/` is `[tool.mutmut]` in pyproject.toml.
Survivors that change nothing a user can observe are named, each with its reason and the line mutmut writes, in
tests/data/mutation_equivalent.toml; the table shows them.

Why a wrapper and not `mutmut run`: the tool's package is named `src` (`from src.core import ...`), and mutmut 3.8
takes `src/` for a src-layout folder: it strips `src.` from every mutant's key, while Python names the modules
`src.x.y`, and it asserts that no function it counts is in a module named `src.` (its `record_trampoline_hit`).
`_keep_the_src_package` undoes both, in this process: mutmut forks its workers from it, so they carry the change.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import json
import os
import platform
import sys
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "mutation.md"
EQUIVALENT = REPO / "tests" / "data" / "mutation_equivalent.toml"
BEGIN = "<!-- mutation table: made by `python -m devtools.mutation table`; do not edit by hand -->"
END = "<!-- end of the mutation table -->"
JUDGED_BY = REPO / "mutants" / "devtools-mutation-tests.json"  # each module's --tests, as its last run had them
FAST_TIER = 'the fast tier (`-m "not slow"`, pyproject.toml\'s `[tool.mutmut]`)'
HEADER = (
    "| module | mutants | killed | timeout | survived | no test | not run | score | survivors' reasons | measured on |",
    "|---|---|---|---|---|---|---|---|---|---|",
)
# mutmut's exit codes, as its `mutmut.stats.status_by_exit_code` reads them (copied: the table is made without
# importing mutmut's command line, which sets the process's start method)
KILLED = {1, 3}
TIMEOUT = {36, -24, 24, 152, 255}
SURVIVED = {0}
NO_TEST = {5, 33}


def _keep_the_src_package() -> None:
    """Mutant keys keep their `src.` (`src.metrics.paired.x_holm__mutmut_3`, as `__module__` names the function),
    and a hit in a `src.` module is counted (the assertion against it dropped). Only the default stack depth is
    supported (`max_stack_depth` unset), which is all the replacement does."""
    import mutmut.__main__ as main
    import mutmut.mutation.file_mutation as file_mutation
    import mutmut.mutation.trampoline as trampoline
    import mutmut.stats as stats
    import mutmut.utils.format_utils as format_utils
    from mutmut.configuration import config
    from mutmut.state import state

    def get_mutant_name(relative_source_path: Path, mutant_method_name: str) -> str:
        module_name = str(relative_source_path)[: -len(relative_source_path.suffix)].replace(os.sep, ".")
        return f"{module_name}.{mutant_method_name}".replace(".__init__.", ".")

    def record_trampoline_hit(name: str, caller: str | None = None) -> None:
        if config().max_stack_depth != -1:
            raise SystemExit("devtools.mutation: max_stack_depth is not supported (leave it unset in [tool.mutmut])")
        state()._stats.add(name)
        if caller is not None and config().track_dependencies:
            state().function_dependencies[name].add(caller)

    for module in (format_utils, main, file_mutation):
        module.get_mutant_name = get_mutant_name  # type: ignore[attr-defined]
    for module in (stats, trampoline):
        module.record_trampoline_hit = record_trampoline_hit  # type: ignore[attr-defined]


# A test's own `python ...` process (a job's subprocess) runs mutmut's trampolines too, with the run's
# MUTANT_UNDER_TEST: a mutant is active there as in the test. While mutmut counts which tests call which function
# ("stats"), what such a process counts is lost with it anyway, so there the hit is dropped rather than refused for
# its `src.` (this file, first on the children's PYTHONPATH, is imported by Python at their start).
SUBPROCESS_SHIM = """\
import os

if os.environ.get("MUTANT_UNDER_TEST") == "stats":
    import mutmut.mutation.trampoline
    import mutmut.stats

    def _dropped(name, caller=None):
        pass

    mutmut.stats.record_trampoline_hit = mutmut.mutation.trampoline.record_trampoline_hit = _dropped
"""


def run(names: list[str], max_children: int | None, tests: list[str] | None = None) -> int:
    """mutmut's `run` in this process, from the repo's root (mutmut works in ./mutants). `tests`: judge by these
    fast tests only, in place of the whole fast tier (quicker; kills fewer, so its score is a lower bound)."""
    os.chdir(REPO)
    from mutmut.configuration import config

    if tests:
        missing = [path for path in tests if not (REPO / path.split("::")[0]).exists()]
        if missing:
            print(f"error: --tests {' '.join(missing)}: no such file; name test files or modules", file=sys.stderr)
            return 2
        config().pytest_add_cli_args_test_selection = [*config().pytest_add_cli_args_test_selection, *tests]
    (REPO / "mutants").mkdir(exist_ok=True)
    before = _timings(REPO / "mutants")
    site = REPO / "mutants" / ".subprocess-shim"
    site.mkdir(parents=True, exist_ok=True)
    (site / "sitecustomize.py").write_text(SUBPROCESS_SHIM, encoding="utf-8")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (str(site), os.environ.get("PYTHONPATH"))))
    # the data folder the worktree's tests see, not one next to mutants/
    os.environ.setdefault("MCQ_DATA_DIR", str((REPO.parent / "shared" / "data").resolve()))
    import mutmut.__main__ as main

    _keep_the_src_package()
    try:
        main._run(names, max_children)
    except SystemExit as stop:  # mutmut exits on a failed baseline: the table is still made from what it has
        if stop.code not in (None, 0):
            print(f"mutmut stopped (exit {stop.code})", file=sys.stderr)
            return int(stop.code) if isinstance(stop.code, int) else 1
    finally:
        _record_judges(before, _timings(REPO / "mutants"), tests or [])
    return 0


def _timings(mutants: Path) -> dict[str, dict[str, float]]:
    """Each module's per-mutant durations as mutmut recorded them: a mutant run again has a new one."""
    return {
        str(meta.relative_to(mutants)).removesuffix(".meta"): json.loads(meta.read_text(encoding="utf-8")).get(
            "durations_by_key", {}
        )
        for meta in mutants.rglob("*.py.meta")
    }


def _judges() -> dict[str, list[str]]:
    """module path -> the `--tests` that judged its mutants last ([] for the fast tier)."""
    recorded = json.loads(JUDGED_BY.read_text(encoding="utf-8")) if JUDGED_BY.is_file() else {}
    return recorded if isinstance(recorded, dict) else {}


def _record_judges(before: dict[str, dict[str, float]], after: dict[str, dict[str, float]], tests: list[str]) -> None:
    """The modules with a mutant run in this run (a duration new or changed) were judged by `tests`."""
    judges = _judges()
    for path, durations in after.items():
        if any(before.get(path, {}).get(key) != seconds for key, seconds in durations.items()):
            judges[path] = tests
    JUDGED_BY.write_text(json.dumps(judges, indent=1, sort_keys=True), encoding="utf-8")


@dataclass
class Module:
    """One source file's results: mutmut's exit code for each of its mutants (None: not run yet)."""

    path: str
    exit_codes: dict[str, int | None]
    seconds: float = 0.0
    measured: str = ""
    reasons: dict[str, str] = field(default_factory=dict)

    def count(self, codes: set[int]) -> int:
        return sum(code in codes for code in self.exit_codes.values())

    @property
    def survivors(self) -> list[str]:
        return sorted(name for name, code in self.exit_codes.items() if code in SURVIVED)

    def row(self) -> str:
        killed, timeout = self.count(KILLED), self.count(TIMEOUT)
        survived, no_test = self.count(SURVIVED), self.count(NO_TEST)
        not_run = sum(code is None for code in self.exit_codes.values())
        equivalent = [name for name in self.survivors if name in self.reasons]
        judged = killed + timeout + survived + no_test - len(equivalent)
        score = f"{100 * (killed + timeout) / judged:.1f} %" if judged else "-"
        said = [f"`{name.rpartition('.')[2]}`: {self.reasons[name]}" for name in equivalent]
        unexplained = survived - len(equivalent)
        if unexplained:
            said.append(f"{unexplained} not explained yet")
        cells = (
            f"`{self.path}`",
            str(len(self.exit_codes)),
            str(killed),
            str(timeout),
            str(survived),
            str(no_test),
            str(not_run),
            score,
            "; ".join(said) or "-",
            self.measured,
        )
        return "| " + " | ".join(cells) + " |"


def load_equivalent(path: Path = EQUIVALENT) -> dict[str, dict[str, str]]:
    """The named equivalent mutants: {mutant name: {"change": the line mutmut writes, "reason": why}}."""
    if not path.is_file():
        return {}
    return tomllib.loads(path.read_text(encoding="utf-8"))


def results(mutants: Path, equivalent: dict[str, dict[str, str]]) -> list[Module]:
    """Every source file with a mutmut result file (`mutants/<path>.meta`), sorted by path; a file with no mutant
    (nothing to mutate) is left out."""
    out = []
    for meta in sorted(mutants.rglob("*.py.meta")):
        data = json.loads(meta.read_text(encoding="utf-8"))
        codes = data["exit_code_by_key"]
        if not codes:
            continue
        stamp = datetime.datetime.fromtimestamp(meta.stat().st_mtime, datetime.UTC)
        ran = any(code is not None for code in codes.values())
        out.append(
            Module(
                path=str(meta.relative_to(mutants)).removesuffix(".meta"),
                exit_codes=codes,
                seconds=sum(data.get("durations_by_key", {}).values()),
                measured=f"{stamp:%Y-%m-%d}, {machine()}" if ran else "-",
                reasons={name: entry["reason"] for name, entry in equivalent.items()},
            )
        )
    return out


def machine() -> str:
    """The CPU's model name and the cores (e.g. "AMD EPYC 9R14, 2 cores"), or the platform's word for it."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.partition(':')[2].strip()}, {os.cpu_count()} cores"
    except OSError:
        pass
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"


def ran(modules: list[Module]) -> list[Module]:
    """The modules with at least one mutant run: the table's rows."""
    return [m for m in modules if any(code is not None for code in m.exit_codes.values())]


def table(modules: list[Module], only_run: bool = True) -> str:
    """The markdown table: one row per module that has a result (`only_run`: at least one mutant run), and a last
    row of the totals."""
    shown = ran(modules) if only_run else modules
    rows = [*HEADER, *(m.row() for m in shown)]
    if shown:
        every: dict[str, int | None] = {}
        reasons: dict[str, str] = {}
        for m in shown:
            every.update(m.exit_codes)
            reasons.update(m.reasons)
        total = Module("all of the above", every, reasons=reasons).row().split(" | ")
        total[8] = "-"  # the reasons are the rows'
        total[0] = "| **all of the above**"
        rows.append(" | ".join(total))
    return "\n".join(rows)


def judged_by(modules: list[Module]) -> str:
    """The lines under the table: which tests judged each row's mutants (its module's last run)."""
    judges = _judges()
    narrower = {m.path: judges[m.path] for m in modules if judges.get(m.path)}
    if not narrower:
        return f"Judged by {FAST_TIER}."
    lines = [
        f"- `{path}`: judged by these fast tests only (`--tests`): {', '.join(f'`{t}`' for t in tests)}; the fast "
        "tier kills at least as many."
        for path, tests in narrower.items()
    ]
    if len(narrower) < len(modules):
        lines.append(f"- the other rows: judged by {FAST_TIER}.")
    return "\n".join(lines)


def write_table(text: str, page: Path = PAGE) -> None:
    """Replace what lies between the page's two markers with `text`."""
    content = page.read_text(encoding="utf-8")
    head, begin, rest = content.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not begin or not end:
        raise ValueError(f"{page.name} lacks the table's markers {BEGIN!r} and {END!r}: put them back around it")
    page.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}", encoding="utf-8")


def per_mutant_seconds(modules: list[Module]) -> tuple[int, float]:
    """How many mutants were run and their mean seconds each (mutmut's own per-mutant durations)."""
    ran = Counter()
    seconds = 0.0
    for m in modules:
        ran["n"] += sum(code is not None and code not in NO_TEST for code in m.exit_codes.values())
        seconds += m.seconds
    return ran["n"], seconds / max(1, ran["n"])


def source_of(name: str) -> Path:
    """The source file of a mutant (`src.metrics.paired.x_holm__mutmut_3` -> src/metrics/paired.py; a package's
    own mutants are its __init__.py's, whose `.__init__` mutmut leaves out of the name)."""
    from mutmut.mutation.trampoline_templates import CLASS_NAME_SEPARATOR

    parts = name.split(".")
    module = next(i for i, part in enumerate(parts) if part.startswith(("x_", "x" + CLASS_NAME_SEPARATOR)))
    path = REPO.joinpath(*parts[:module])
    return path.with_suffix(".py") if path.with_suffix(".py").is_file() else path / "__init__.py"


def _function_lines(code: str, functions: set[str]) -> set[int]:
    """The lines, decorators included, of the functions and methods mutmut names `functions` (`x_f`, `xǁCǁf`): the
    lines mutmut may mutate when it makes only their mutants (its `covered_lines`)."""
    from mutmut.mutation.trampoline_templates import mangle_function_name

    lines: set[int] = set()

    def add(body: list[ast.stmt], class_name: str | None) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if mangle_function_name(name=node.name, class_name=class_name) in functions:
                    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                    lines.update(range(first, (node.end_lineno or node.lineno) + 1))
            elif isinstance(node, ast.ClassDef) and class_name is None:
                add(node.body, node.name)

    add(ast.parse(code).body, None)
    return lines


def mutant_diffs(names: list[str]) -> dict[str, str]:
    """The diff mutmut shows for each mutant (`mutmut show NAME`), made from the source as it is now, without
    mutants/. Each file is mutated once, in the named functions only: a function's mutants and their numbers are
    its own nodes' (mutmut numbers them within the function), the same as mutating the whole file makes, at a
    fraction of its cost (9 s of CPU for src/backends/openai_backend.py whole). Each mutated file is parsed once:
    mutmut's `get_diff_for_mutant(key, source=...)` parses the whole mutated source again for every mutant (~3 s
    each in openai_backend), so its diff is made here from the one parse, as it makes it. LookupError for a mutant
    that mutmut does not make from that source."""
    from difflib import unified_diff

    import libcst
    from mutmut.mutation.diff_apply import read_mutant_function, read_original_function
    from mutmut.mutation.file_mutation import mutate_file_contents

    by_file: dict[Path, dict[str, str]] = {}
    for name in names:
        relative = source_of(name).relative_to(REPO)
        by_file.setdefault(relative, {})[name] = name.removeprefix(
            ".".join(relative.with_suffix("").parts).removesuffix(".__init__") + "."
        )
    diffs: dict[str, str] = {}
    for relative, keys in by_file.items():
        code = (REPO / relative).read_text(encoding="utf-8")
        functions = {key.rpartition("__mutmut_")[0] for key in keys.values()}
        mutated = mutate_file_contents(str(relative), code, _function_lines(code, functions), None)
        module = libcst.parse_module(mutated.code)
        for name, key in keys.items():
            if key not in mutated.mutant_names:
                raise LookupError(f"{name}: mutmut makes no such mutant of {relative} now (renumbered? run it again)")
            original, mutant = (
                libcst.Module([function]).code.strip()
                for function in (read_original_function(module, key), read_mutant_function(module, key))
            )
            lines = unified_diff(
                original.split("\n"), mutant.split("\n"), fromfile=str(relative), tofile=str(relative), lineterm=""
            )
            diffs[name] = "\n".join(lines)
    return diffs


def mutant_diff(name: str) -> str:
    """The diff mutmut shows for one mutant (`mutant_diffs`)."""
    return mutant_diffs([name])[name]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.mutation", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="mutmut run (the mutants not yet judged, or those named), then table")
    run_parser.add_argument("names", nargs="*", help='mutant names or globs, e.g. "src.backends.*" (default: all)')
    run_parser.add_argument("--max-children", type=int, help="parallel mutants (default: the cores)")
    run_parser.add_argument(
        "--tests",
        nargs="+",
        help="judge by these fast tests only (files, modules' doctests), not the whole fast tier: quicker, a lower "
        "bound on its kills; results of another selection are judged again",
    )
    commands.add_parser("table", help="write docs/mutation.md's table from mutants/, nothing run")
    args = parser.parse_args(argv)
    code = 0
    if args.command == "run":
        code = run(args.names, args.max_children, args.tests)
        if code == 2:
            return code
    modules = results(REPO / "mutants", load_equivalent())
    if not modules:
        print("error: no mutmut results in mutants/; run `python -m devtools.mutation run` first", file=sys.stderr)
        return 2
    try:
        write_table(table(modules) + "\n\n" + judged_by(ran(modules)))
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    n, mean = per_mutant_seconds(modules)
    total = sum(len(m.exit_codes) for m in modules)
    print(f"{PAGE.relative_to(REPO)}: table written; {n} mutants run, {mean:.2f} s each; {total} mutants in all")
    return code


if __name__ == "__main__":
    sys.exit(main())
