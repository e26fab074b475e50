"""`python -m devtools.mutation` (docs/mutation.md): mutmut's results made into the page's table, the page's table
in that form, every named equivalent mutant one that mutmut makes from the source as it is, and the shim that lets
mutmut count a package named `src`."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from devtools import mutation

from .conftest import REPO

# mutmut runs the fast tier in its own process, with the shim in place (MUTANT_UNDER_TEST set in every phase): these
# tests, which patch mutmut and make mutants themselves, are not part of what judges a mutant
pytestmark = pytest.mark.skipif("MUTANT_UNDER_TEST" in os.environ, reason="inside mutmut's own run")

PROMISE = pytest.mark.promise(
    "docs/mutation.md", "the table is made by `python -m devtools.mutation`, each survivor named equivalent with why"
)


def _meta(folder: Path, path: str, codes: dict[str, int | None], seconds: float = 1.0) -> None:
    """A mutmut result file as mutmut 3.8 writes it (mutants/<path>.meta)."""
    meta = folder / f"{path}.meta"
    meta.parent.mkdir(parents=True, exist_ok=True)
    meta.write_text(
        json.dumps(
            {
                "exit_code_by_key": codes,
                "hash_by_function_name": {},
                "type_check_error_by_key": {},
                "durations_by_key": {name: seconds for name, code in codes.items() if code is not None},
                "estimated_durations_by_key": {},
            }
        )
    )


def _cells(row: str) -> list[str]:
    return [cell.strip() for cell in row.strip().strip("|").split(" | ")]


@PROMISE
def test_the_table_counts_each_modules_verdicts_and_shows_the_equivalent_survivors_reasons(tmp_path):
    """Exit codes as mutmut's stats read them (1 killed, 36 timeout, 0 survived, 33 no test, None not run); the score
    leaves the named equivalent survivors out of its denominator; a module with nothing run has no row."""
    name = "src.metrics.paired.x_holm__mutmut_"
    codes = {f"{name}{i}": 1 for i in range(1, 7)} | {f"{name}7": 36, f"{name}8": 0, f"{name}9": 0, f"{name}10": 33}
    _meta(tmp_path, "src/metrics/paired.py", codes)
    _meta(tmp_path, "src/metrics/draws.py", {"src.metrics.draws.x_f__mutmut_1": None})
    _meta(tmp_path, "src/metrics/empty.py", {})
    equivalent = {f"{name}8": {"change": "round(running, 13)", "reason": "twelve digits are all a p-value shows"}}
    modules = mutation.results(tmp_path, equivalent)
    assert [m.path for m in modules] == ["src/metrics/draws.py", "src/metrics/paired.py"]
    lines = mutation.table(modules).splitlines()
    assert tuple(lines[:2]) == mutation.HEADER
    row, total = _cells(lines[2]), _cells(lines[3])
    assert row[:8] == ["`src/metrics/paired.py`", "10", "6", "1", "2", "1", "0", "77.8 %"]  # 7 of 9 judged
    assert row[8] == "`x_holm__mutmut_8`: twelve digits are all a p-value shows; 1 not explained yet"
    assert total[0] == "**all of the above**" and total[1:8] == row[1:8]
    assert len(lines) == 4  # draws.py: nothing run, no row


def test_an_unexplained_survivor_counts_against_the_score(tmp_path):
    _meta(tmp_path, "src/a.py", {"src.a.x_f__mutmut_1": 1, "src.a.x_f__mutmut_2": 0})
    (row,) = mutation.table(mutation.results(tmp_path, {})).splitlines()[2:3]
    assert _cells(row)[7] == "50.0 %" and _cells(row)[8] == "1 not explained yet"


def test_the_lines_under_the_table_name_each_rows_own_narrower_tests(tmp_path, monkeypatch):
    monkeypatch.setattr(mutation, "JUDGED_BY", tmp_path / "tests.json")
    _meta(tmp_path, "src/a.py", {"src.a.x_f__mutmut_1": 1})
    _meta(tmp_path, "src/b.py", {"src.b.x_g__mutmut_1": 1})
    modules = mutation.results(tmp_path, {})
    assert mutation.judged_by(modules) == f"Judged by {mutation.FAST_TIER}."
    # a run of a's mutants by its own tests, then one of b's by the fast tier: each row keeps its own judges
    before = mutation._timings(tmp_path)
    _meta(tmp_path, "src/a.py", {"src.a.x_f__mutmut_1": 1}, seconds=2.0)
    mutation._record_judges(before, mutation._timings(tmp_path), ["tests/test_a.py"])
    before = mutation._timings(tmp_path)
    _meta(tmp_path, "src/b.py", {"src.b.x_g__mutmut_1": 1}, seconds=3.0)
    mutation._record_judges(before, mutation._timings(tmp_path), [])
    assert mutation.judged_by(modules) == (
        "- `src/a.py`: judged by these fast tests only (`--tests`): `tests/test_a.py`; the fast tier kills at least "
        f"as many.\n- the other rows: judged by {mutation.FAST_TIER}."
    )


def test_the_table_replaces_only_what_lies_between_its_markers(tmp_path):
    page = tmp_path / "mutation.md"
    page.write_text(f"# Title\n\ntext\n{mutation.BEGIN}\nold table\n{mutation.END}\n\nmore text\n")
    mutation.write_table("| new |", page)
    assert page.read_text() == f"# Title\n\ntext\n{mutation.BEGIN}\n| new |\n{mutation.END}\n\nmore text\n"
    page.write_text("no markers\n")
    with pytest.raises(ValueError, match="lacks the table's markers"):
        mutation.write_table("| new |", page)


def test_without_results_the_command_says_what_to_run_and_exits_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(mutation, "REPO", tmp_path)
    assert mutation.main(["table"]) == 2
    assert "run `python -m devtools.mutation run` first" in capsys.readouterr().err


@PROMISE
def test_docs_mutation_md_holds_a_table_in_the_generators_form_whose_totals_add_up():
    """The page's table lies between the generator's markers, has its header, and each row's counts and score agree
    with each other (the table itself is made from mutants/, which git ignores)."""
    text = (REPO / "docs" / "mutation.md").read_text(encoding="utf-8")
    assert text.count(mutation.BEGIN) == 1 and text.count(mutation.END) == 1
    lines = text.split(mutation.BEGIN)[1].split(mutation.END)[0].strip().splitlines()
    assert tuple(lines[:2]) == mutation.HEADER
    rows = [_cells(line) for line in lines[2:] if line.startswith("|")]
    judges = [line for line in lines[2:] if not line.startswith("|") and line]
    assert judges, "the lines under the table say which tests judged the mutants"
    if judges[0].startswith("Judged by "):  # every row by the fast tier
        assert len(judges) == 1, judges
    else:
        assert all(line.startswith("- ") for line in judges), judges
    named = {line.split("`")[1] for line in judges if line.startswith("- `")}
    assert named <= {row[0].strip("`") for row in rows}, "each line under the table names a row's module"
    assert rows, "the table has no row: run `python -m devtools.mutation run` and commit the page"
    *modules, total = rows
    assert total[0] == "**all of the above**"
    equivalent = mutation.load_equivalent()
    for row in modules:
        assert len(row) == len(_cells(mutation.HEADER[0])), row
        assert (REPO / row[0].strip("`")).is_file(), f"{row[0]}: no such source file"
        mutants, killed, timeout, survived, no_test, not_run = map(int, row[1:7])
        assert killed + timeout + survived + no_test + not_run == mutants, row
        named = len(re.findall(r"`x[_\u01c1][^`]*`:", row[8]))
        judged = killed + timeout + survived + no_test - named
        assert row[7] == f"{100 * (killed + timeout) / judged:.1f} %", row
    for column in range(1, 7):
        assert int(total[column]) == sum(int(row[column]) for row in modules), mutation.HEADER[0].split("|")[column + 1]
    assert named <= len(equivalent)


@PROMISE
def test_every_named_equivalent_mutant_is_one_mutmut_makes_from_the_source_now():
    """Each entry of tests/data/mutation_equivalent.toml names a mutant that mutmut makes from today's source, and its
    `change` is the line that mutant writes: a renumbered or changed function makes the entry fail here, not say
    something of another mutant."""
    entries = mutation.load_equivalent()
    assert entries, "tests/data/mutation_equivalent.toml names no mutant"
    diffs = mutation.mutant_diffs(list(entries))
    for name, entry in entries.items():
        assert set(entry) == {"change", "reason"} and entry["reason"].strip(), name
        added = [line[1:].strip() for line in diffs[name].splitlines() if line.startswith("+ ")]
        assert entry["change"].strip() in added, f"{name}: writes {added}, not {entry['change']!r}"


def test_a_mutant_that_mutmut_does_not_make_is_refused_with_its_name():
    with pytest.raises(LookupError, match=r"src.metrics.paired.x_holm__mutmut_9999: mutmut makes no such mutant"):
        mutation.mutant_diff("src.metrics.paired.x_holm__mutmut_9999")
    assert mutation.source_of("src.metrics.paired.x_holm__mutmut_1") == REPO / "src" / "metrics" / "paired.py"
    assert mutation.source_of("src.backends.x_f__mutmut_1") == REPO / "src" / "backends" / "__init__.py"


def test_the_shim_keeps_the_src_package_in_mutant_keys_and_counts_its_hits(monkeypatch):
    """mutmut 3.8 strips `src.` from a key and refuses a hit in a `src.` module; the tool's package is `src`, whose
    functions Python names `src.x.y.f`: with the shim the key is the name the trampoline sees, and the hit counts."""
    import mutmut.__main__ as main
    import mutmut.mutation.file_mutation as file_mutation
    import mutmut.mutation.trampoline as trampoline
    import mutmut.stats as stats
    import mutmut.utils.format_utils as format_utils
    from mutmut.state import state

    for module, attribute in (
        (format_utils, "get_mutant_name"),
        (main, "get_mutant_name"),
        (file_mutation, "get_mutant_name"),
        (stats, "record_trampoline_hit"),
        (trampoline, "record_trampoline_hit"),
    ):
        monkeypatch.setattr(module, attribute, getattr(module, attribute))  # put back after the test
    unshimmed = format_utils.get_mutant_name(Path("src/metrics/paired.py"), "x_holm__mutmut_1")
    assert unshimmed == "metrics.paired.x_holm__mutmut_1"
    with pytest.raises(AssertionError, match="starts with `src.`"):
        trampoline.record_trampoline_hit("src.metrics.paired.x_holm")
    mutation._keep_the_src_package()
    for module in (format_utils, main, file_mutation):
        assert module.get_mutant_name(Path("src/metrics/paired.py"), "x_holm__mutmut_1") == (
            "src.metrics.paired.x_holm__mutmut_1"
        )
        assert module.get_mutant_name(Path("src/backends/__init__.py"), "x_f__mutmut_1") == "src.backends.x_f__mutmut_1"
    monkeypatch.setattr(state(), "_stats", set())
    trampoline.record_trampoline_hit("src.metrics.paired.x_holm")
    assert state()._stats == {"src.metrics.paired.x_holm"}


def test_mutating_only_the_named_functions_makes_their_mutants_as_mutating_the_whole_file_does(tmp_path, monkeypatch):
    """`mutant_diffs` mutates a file in the named functions only (its cheap path); their mutants, numbers and diffs
    are the ones mutmut makes from the whole file, for functions and a method."""
    from mutmut.mutation.diff_apply import get_diff_for_mutant
    from mutmut.mutation.file_mutation import mutate_file_contents

    source = tmp_path / "src" / "toy.py"
    source.parent.mkdir()
    source.write_text(
        "def f(a, b=2):\n    return a + b * 3 if a > 1 else 'x'\n\n\n"
        "def g(n):\n    return [n - 1, n // 2, 'y']\n\n\n"
        "class C:\n    k = 4\n\n    def m(self, x):\n        return x < self.k and not x\n"
    )
    monkeypatch.setattr(mutation, "REPO", tmp_path)
    whole = mutate_file_contents("src/toy.py", source.read_text(), None, None)
    names = [f"src.toy.{key}" for key in whole.mutant_names]
    assert {name.split(".")[-1].partition("__mutmut_")[0] for name in names} == {"x_f", "x_g", "xǁCǁm"}
    for name in names[::2]:  # each one alone, as `mutant_diff` makes it: only its own function mutated
        assert mutation.mutant_diff(name) == get_diff_for_mutant(
            name.removeprefix("src.toy."), source=whole.code, path=Path("src/toy.py")
        ), name
    assert mutation.mutant_diffs(names) == {
        name: get_diff_for_mutant(name.removeprefix("src.toy."), source=whole.code, path=Path("src/toy.py"))
        for name in names
    }
