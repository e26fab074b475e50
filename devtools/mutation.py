"""`python -m devtools.mutation`: mutmut (3.8) over src/ and hydra_plugins/, judged by the fast tier, and
docs/mutation.md's table made from the record of its results (devtools/mutation_results.json).

    python -m devtools.mutation run                        # every mutant not yet judged, then the table
    python -m devtools.mutation run "src.backends.*"       # mutmut's own selection: mutant names, globs allowed
    python -m devtools.mutation table                      # the table again from the record, nothing run
    python -m devtools.mutation count                      # every module's mutants counted, none run, then table
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
import hashlib
import json
import os
import platform
import sys
import tomllib
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "mutation.md"
EQUIVALENT = REPO / "tests" / "data" / "mutation_equivalent.toml"
BEGIN = "<!-- mutation table: made by `python -m devtools.mutation table`; do not edit by hand -->"
END = "<!-- end of the mutation table -->"
# each module's last whole judgement, committed: mutants/ is git-ignored and mutmut forgets the verdicts of another
# `--tests` selection, so rows judged by separate runs (and sessions) are kept here, each with the text it judged
RECORD = REPO / "devtools" / "mutation_results.json"
SOURCES = ("src", "hydra_plugins")  # [tool.mutmut]'s source_paths
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
    """mutmut's `run` in this process, from the repo's root (mutmut works in ./mutants), then the modules it judged
    written to the record. `tests`: judge by these fast tests only, in place of the whole fast tier (quicker; kills
    fewer, so its score is a lower bound)."""
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
    hashes = source_hashes()  # the source mutmut mutates now: an edit made while it runs is not what it judged
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
    except SystemExit as stop:  # mutmut exits on a failed baseline: the record keeps what it has judged
        if stop.code not in (None, 0):
            print(f"mutmut stopped (exit {stop.code})", file=sys.stderr)
            return int(stop.code) if isinstance(stop.code, int) else 1
    finally:
        write_record(
            record(
                load_record(),
                results(REPO / "mutants"),
                before,
                _timings(REPO / "mutants"),
                hashes,
                tests or [],
                f"{today()}, {machine()}",
            )
        )
    return 0


def _timings(mutants: Path) -> dict[str, dict[str, float]]:
    """Each module's per-mutant durations as mutmut recorded them: a mutant run again has a new one."""
    return {
        str(meta.relative_to(mutants)).removesuffix(".meta"): json.loads(meta.read_text(encoding="utf-8")).get(
            "durations_by_key", {}
        )
        for meta in mutants.rglob("*.py.meta")
    }


def source_files(root: Path | None = None) -> list[str]:
    """Every module mutmut mutates ([tool.mutmut]'s source_paths), as paths from the repo's root."""
    root = root or REPO
    return sorted(str(p.relative_to(root)) for folder in SOURCES for p in (root / folder).rglob("*.py"))


def source_hashes(root: Path | None = None) -> dict[str, str]:
    """sha256 of each module's text: a recorded verdict holds for that text only."""
    root = root or REPO
    return {path: hashlib.sha256((root / path).read_bytes()).hexdigest() for path in source_files(root)}


def today() -> str:
    return f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d}"


@dataclass
class Module:
    """One source file's verdicts: counts, and the survivors and untested mutants by name (what the table and the
    equivalent-mutant check read). `tests`: the `--tests` that judged it ([]: the fast tier); `sha256`: the text
    judged."""

    path: str
    mutants: int
    killed: int = 0
    timeout: int = 0
    survived: list[str] = field(default_factory=list)
    no_test: list[str] = field(default_factory=list)
    not_run: int = 0
    seconds: float = 0.0
    measured: str = "-"
    tests: list[str] = field(default_factory=list)
    sha256: str = ""

    @classmethod
    def from_meta(cls, path: str, data: dict[str, Any]) -> Module:
        """From mutmut's result file (`mutants/<path>.meta`: each mutant's exit code, None for not run)."""
        codes: dict[str, int | None] = data["exit_code_by_key"]
        return cls(
            path=path,
            mutants=len(codes),
            killed=sum(code in KILLED for code in codes.values()),
            timeout=sum(code in TIMEOUT for code in codes.values()),
            survived=sorted(name for name, code in codes.items() if code in SURVIVED),
            no_test=sorted(name for name, code in codes.items() if code in NO_TEST),
            not_run=sum(code is None for code in codes.values()),
            seconds=round(sum(data.get("durations_by_key", {}).values()), 1),
        )

    @property
    def judged(self) -> int:
        return self.mutants - self.not_run

    def score(self, reasons: dict[str, str]) -> str:
        """Killed and timed out over those judged, the survivors named equivalent left out."""
        equivalent = [name for name in self.survived if name in reasons]
        judged = self.judged - len(equivalent)
        return f"{100 * (self.killed + self.timeout) / judged:.1f} %" if judged else "-"

    def row(self, reasons: dict[str, str], sha256: str | None) -> str:
        """The table's row; `sha256`: the module's text now (None: the file is gone), against the one judged."""
        equivalent = [name for name in self.survived if name in reasons]
        said = [f"`{name.rpartition('.')[2]}`: {reasons[name]}" for name in equivalent]
        if len(self.survived) > len(equivalent):
            said.append(f"{len(self.survived) - len(equivalent)} not explained yet")
        measured, score = self.measured, self.score(reasons)
        if self.judged and sha256 != self.sha256:
            measured, score = f"{self.measured}; the source changed since: run it again", "stale"
        cells = (
            f"`{self.path}`",
            str(self.mutants),
            str(self.killed),
            str(self.timeout),
            str(len(self.survived)),
            str(len(self.no_test)),
            str(self.not_run),
            score,
            "; ".join(said) or "-",
            measured,
        )
        return "| " + " | ".join(cells) + " |"


def load_equivalent(path: Path = EQUIVALENT) -> dict[str, dict[str, str]]:
    """The named equivalent mutants: {mutant name: {"change": the line mutmut writes, "reason": why}}."""
    if not path.is_file():
        return {}
    return tomllib.loads(path.read_text(encoding="utf-8"))


def results(mutants: Path) -> dict[str, Module]:
    """Every source file with a mutmut result file (`mutants/<path>.meta`), by path."""
    return {
        path: Module.from_meta(path, json.loads(meta.read_text(encoding="utf-8")))
        for meta in sorted(mutants.rglob("*.py.meta"))
        for path in [str(meta.relative_to(mutants)).removesuffix(".meta")]
    }


def record(
    kept: dict[str, Module],
    found: dict[str, Module],
    before: dict[str, dict[str, float]],
    after: dict[str, dict[str, float]],
    hashes: dict[str, str],
    tests: list[str],
    measured: str,
) -> dict[str, Module]:
    """The record after a run (`before`/`after`: each module's per-mutant durations around it; a mutant run has a
    new one). A module this run judged takes this run's verdicts, unless it judged only part of it and the record
    holds a whole judgement of the same text (mutmut forgets the verdicts of another `--tests` selection: the
    record does not). A module not run keeps the record's row for the same text; one whose text changed since is
    counted, none judged."""
    out = dict(kept)
    for path, module in found.items():
        ran_now = any(before.get(path, {}).get(key) != s for key, s in after.get(path, {}).items())
        sha256 = hashes.get(path, "")
        old = kept.get(path)
        same_text = old is not None and old.sha256 == sha256
        whole_kept = same_text and old is not None and old.not_run == 0
        if ran_now and (module.not_run == 0 or not whole_kept):
            out[path] = replace(module, measured=measured, tests=list(tests), sha256=sha256)
        elif not same_text:
            out[path] = Module(path, module.mutants, not_run=module.mutants, sha256=sha256)
    return out


def counted(kept: dict[str, Module], hashes: dict[str, str], root: Path | None = None) -> dict[str, Module]:
    """The record with every module's mutants counted (mutmut's own mutation of each file, none run): a module
    whose recorded text is the same keeps its row; the others are counted, none judged."""
    from mutmut.mutation.file_mutation import mutate_file_contents

    root = root or REPO
    out = dict(kept)
    for path, sha256 in hashes.items():
        old = kept.get(path)
        if old is None or old.sha256 != sha256:
            n = len(mutate_file_contents(path, (root / path).read_text(encoding="utf-8"), None, None).mutant_names)
            out[path] = Module(path, n, not_run=n, sha256=sha256)
    return out


def load_record(path: Path | None = None) -> dict[str, Module]:
    """The committed record (devtools/mutation_results.json): each module's last whole judgement."""
    path = path or RECORD
    if not path.is_file():
        return {}
    return {p: Module(path=p, **fields) for p, fields in json.loads(path.read_text(encoding="utf-8")).items()}


def write_record(modules: dict[str, Module], path: Path | None = None) -> None:
    data = {p: {k: v for k, v in asdict(m).items() if k != "path"} for p, m in sorted(modules.items())}
    (path or RECORD).write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def machine() -> str:
    """The CPU's model name and the cores (e.g. "AMD EPYC 9R14, 2 cores"), or the platform's word for it."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.partition(':')[2].strip()}, {os.cpu_count()} cores"
    except OSError:
        pass
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"


def table(modules: dict[str, Module], hashes: dict[str, str], equivalent: dict[str, dict[str, str]]) -> str:
    """The markdown table: a row for each module with mutants (every module of `hashes`: one mutmut has not counted
    yet shows dashes), the totals, then a line for the modules with nothing to mutate and the lines that say which
    tests judged which rows."""
    reasons = {name: entry["reason"] for name, entry in equivalent.items()}
    rows = list(HEADER)
    shown = [m for m in modules.values() if m.mutants]
    for path in sorted(set(hashes) | {m.path for m in shown}):
        module = modules.get(path)
        if module is None:
            rows.append(f"| `{path}` | - | - | - | - | - | - | - | - | not counted yet |")
        elif module.mutants:
            rows.append(module.row(reasons, hashes.get(path)))
    if shown:
        # a stale row's verdicts are of another text: the total counts its mutants as not run
        now = [
            m if not m.judged or m.sha256 == hashes.get(m.path) else Module(m.path, m.mutants, not_run=m.mutants)
            for m in shown
        ]
        total = Module(
            "all of the above",
            mutants=sum(m.mutants for m in now),
            killed=sum(m.killed for m in now),
            timeout=sum(m.timeout for m in now),
            survived=[name for m in now for name in m.survived],
            no_test=[name for m in now for name in m.no_test],
            not_run=sum(m.not_run for m in now),
            sha256="-",
        ).row(reasons, "-")
        cells = total.split(" | ")
        cells[0], cells[8] = "| **all of the above**", "-"  # the reasons are the rows'
        rows.append(" | ".join(cells))
    empty = sorted(m.path for m in modules.values() if not m.mutants)
    lines = ["\n".join(rows), ""]
    if empty:
        lines.append(f"Nothing to mutate in {', '.join(f'`{p}`' for p in empty)}.")
        lines.append("")
    lines.append(judged_by(shown))
    return "\n".join(lines)


def judged_by(modules: list[Module]) -> str:
    """The lines under the table: which tests judged which rows, each selection said once."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for m in modules:
        if m.judged:
            groups.setdefault(tuple(m.tests), []).append(m.path)
    lines = []
    for tests, paths in sorted(groups.items()):
        rows = ", ".join(f"`{p}`" for p in paths)
        if tests:
            lines.append(
                f"- {rows}: judged by these fast tests only (`--tests`; the fast tier kills at least as many): "
                + ", ".join(f"`{t}`" for t in tests)
            )
        else:
            lines.append(f"- {rows}: judged by {FAST_TIER}")
    return "\n".join(lines) or "No mutant judged yet."


def write_table(text: str, page: Path = PAGE) -> None:
    """Replace what lies between the page's two markers with `text`."""
    content = page.read_text(encoding="utf-8")
    head, begin, rest = content.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not begin or not end:
        raise ValueError(f"{page.name} lacks the table's markers {BEGIN!r} and {END!r}: put them back around it")
    page.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}", encoding="utf-8")


def per_mutant_seconds(modules: list[Module]) -> tuple[int, float]:
    """How many mutants were run (judged, less those no test calls) and their mean seconds each (mutmut's own
    per-mutant durations)."""
    n = sum(m.judged - len(m.no_test) for m in modules)
    return n, sum(m.seconds for m in modules) / max(1, n)


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
        "bound on its kills",
    )
    commands.add_parser("table", help="write docs/mutation.md's table from the record, nothing run")
    commands.add_parser("count", help="count every module's mutants into the record (none run), then the table")
    args = parser.parse_args(argv)
    code = 0
    if args.command == "count":  # only counts: mutant names, which the shim changes, are not kept
        write_record(counted(load_record(), source_hashes()))
    if args.command == "run":
        code = run(args.names, args.max_children, args.tests)
        if code == 2:
            return code
    modules = load_record()
    if not modules:
        print(
            f"error: no mutation record ({RECORD.name}); run `python -m devtools.mutation run` first", file=sys.stderr
        )
        return 2
    try:
        write_table(table(modules, source_hashes(), load_equivalent()))
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    n, mean = per_mutant_seconds(list(modules.values()))
    total = sum(m.mutants for m in modules.values())
    print(f"{PAGE.relative_to(REPO)}: table written; {n} mutants run, {mean:.2f} s each; {total} mutants in all")
    return code


if __name__ == "__main__":
    sys.exit(main())
