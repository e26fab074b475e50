"""`python -m devtools.mutation` (docs/mutation.md): mutmut's results made into the page's table, the page's table
in that form, every named equivalent mutant one that mutmut makes from the source as it is, and the shim that lets
mutmut count a package named `src`."""

from __future__ import annotations

import json
import os
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


HASHES = {"src/metrics/paired.py": "aa", "src/metrics/draws.py": "bb", "src/metrics/empty.py": "cc"}


def _judged(tmp_path: Path, path: str, codes: dict[str, int | None], tests: list[str] | None = None, **kw):
    """`path`'s module as a run that judged `codes` records it (the run's mutmut result file made first)."""
    _meta(tmp_path, path, codes, **kw)
    found = mutation.results(tmp_path)
    return mutation.record(
        {}, {path: found[path]}, {}, mutation._timings(tmp_path), HASHES, tests or [], "today, here"
    )[path]


@PROMISE
def test_the_table_counts_each_modules_verdicts_and_shows_the_equivalent_survivors_reasons(tmp_path):
    """Exit codes as mutmut's stats read them (1 killed, 36 timeout, 0 survived, 33 no test, None not run); the score
    leaves the named equivalent survivors out of its denominator; a module with no mutants has a line, not a row;
    a module mutmut has not counted has a row of dashes."""
    name = "src.metrics.paired.x_holm__mutmut_"
    codes = {f"{name}{i}": 1 for i in range(1, 7)} | {f"{name}7": 36, f"{name}8": 0, f"{name}9": 0, f"{name}10": 33}
    modules = {
        "src/metrics/paired.py": _judged(tmp_path, "src/metrics/paired.py", codes),
        "src/metrics/empty.py": _judged(tmp_path, "src/metrics/empty.py", {}),
    }
    equivalent = {f"{name}8": {"change": "round(running, 13)", "reason": "twelve digits are all a p-value shows"}}
    lines = mutation.table(modules, HASHES, equivalent).splitlines()
    assert tuple(lines[:2]) == mutation.HEADER
    uncounted, row, total = _cells(lines[2]), _cells(lines[3]), _cells(lines[4])
    assert uncounted == ["`src/metrics/draws.py`", *["-"] * 8, "not counted yet"]
    assert row[:8] == ["`src/metrics/paired.py`", "10", "6", "1", "2", "1", "0", "77.8 %"]  # 7 of 9 judged
    assert row[8] == "`x_holm__mutmut_8`: twelve digits are all a p-value shows; 1 not explained yet"
    assert row[9] == "today, here"
    assert total[0] == "**all of the above**" and total[1:8] == row[1:8]
    assert lines[6] == "Nothing to mutate in `src/metrics/empty.py`."
    assert lines[8] == f"- `src/metrics/paired.py`: judged by {mutation.FAST_TIER}"


def test_an_unexplained_survivor_counts_against_the_score(tmp_path):
    module = _judged(tmp_path, "src/metrics/paired.py", {"src.a.x_f__mutmut_1": 1, "src.a.x_f__mutmut_2": 0})
    row = _cells(module.row({}, HASHES["src/metrics/paired.py"]))
    assert row[7] == "50.0 %" and row[8] == "1 not explained yet"


def test_a_row_whose_source_changed_since_it_was_judged_reads_stale(tmp_path):
    module = _judged(tmp_path, "src/metrics/paired.py", {"src.a.x_f__mutmut_1": 1})
    row = _cells(module.row({}, "another text"))
    assert row[7] == "stale" and row[9] == "today, here; the source changed since: run it again"
    assert _cells(module.row({}, HASHES["src/metrics/paired.py"]))[7] == "100.0 %"


def test_the_total_counts_a_stale_rows_mutants_as_not_run(tmp_path):
    """A stale row's verdicts are of a text that is gone: the total leaves them out of its score."""
    fresh = _judged(tmp_path, "src/metrics/paired.py", {"src.a.x_f__mutmut_1": 1, "src.a.x_f__mutmut_2": 0})
    stale = _judged(tmp_path, "src/metrics/draws.py", {"src.b.x_g__mutmut_1": 1, "src.b.x_g__mutmut_2": 1})
    hashes = {**HASHES, "src/metrics/draws.py": "edited since"}
    lines = mutation.table({fresh.path: fresh, stale.path: stale}, hashes, {}).splitlines()
    total = _cells(next(line for line in lines if "all of the above" in line))
    assert total[1:8] == ["4", "1", "0", "1", "0", "2", "50.0 %"]


def test_the_record_keeps_each_modules_last_whole_judgement_across_runs_of_other_tests(tmp_path):
    """A run judges a with its own tests; a later run of b's mutants (mutmut forgetting a's verdicts, as it does
    for another selection) leaves a's row as judged; a part-judgement of a does not replace its whole one; an edit
    of a's text makes it counted, none judged, until it is run again."""
    a, b = "src/metrics/paired.py", "src/metrics/draws.py"
    a_codes, b_codes = {"src.metrics.paired.x_f__mutmut_1": 1}, {"src.metrics.draws.x_g__mutmut_1": 0}
    _meta(tmp_path, a, a_codes)
    _meta(tmp_path, b, dict.fromkeys(b_codes))
    first = mutation.record(
        {}, mutation.results(tmp_path), {}, mutation._timings(tmp_path), HASHES, ["tests/test_a.py"], "one"
    )
    assert (first[a].killed, first[a].tests, first[a].sha256) == (1, ["tests/test_a.py"], "aa")
    assert first[a].measured == "one"
    assert first[b].not_run == 1 and first[b].judged == 0
    before = mutation._timings(tmp_path)
    _meta(tmp_path, a, dict.fromkeys(a_codes))  # mutmut forgot a's verdicts
    _meta(tmp_path, b, b_codes, seconds=2.0)
    second = mutation.record(first, mutation.results(tmp_path), before, mutation._timings(tmp_path), HASHES, [], "two")
    assert second[a] == first[a], "a's row is the judgement its own run made"
    assert (second[b].survived, second[b].tests, second[b].measured) == (["src.metrics.draws.x_g__mutmut_1"], [], "two")
    assert mutation.judged_by([second[a], second[b]]).splitlines() == [
        f"- `{b}`: judged by {mutation.FAST_TIER}",
        f"- `{a}`: judged by these fast tests only (`--tests`; the fast tier kills at least as many): "
        "`tests/test_a.py`",
    ]
    two_mutants = a_codes | {"src.metrics.paired.x_f__mutmut_2": None}
    before = mutation._timings(tmp_path)
    _meta(tmp_path, a, two_mutants, seconds=3.0)  # part of a judged: the whole judgement stays
    third = mutation.record(second, mutation.results(tmp_path), before, mutation._timings(tmp_path), HASHES, [], "3")
    assert third[a] == first[a]
    edited = HASHES | {a: "a2"}
    fourth = mutation.record(third, mutation.results(tmp_path), mutation._timings(tmp_path), {}, edited, [], "4")
    assert (fourth[a].mutants, fourth[a].not_run, fourth[a].sha256) == (2, 2, "a2")


def test_the_record_reads_back_what_it_wrote(tmp_path):
    module = _judged(tmp_path, "src/metrics/paired.py", {"src.a.x_f__mutmut_1": 1, "src.a.x_f__mutmut_2": 0})
    mutation.write_record({module.path: module}, tmp_path / "record.json")
    assert mutation.load_record(tmp_path / "record.json") == {module.path: module}


def test_the_table_replaces_only_what_lies_between_its_markers(tmp_path):
    page = tmp_path / "mutation.md"
    page.write_text(f"# Title\n\ntext\n{mutation.BEGIN}\nold table\n{mutation.END}\n\nmore text\n")
    mutation.write_table("| new |", page)
    assert page.read_text() == f"# Title\n\ntext\n{mutation.BEGIN}\n| new |\n{mutation.END}\n\nmore text\n"
    page.write_text("no markers\n")
    with pytest.raises(ValueError, match="lacks the table's markers"):
        mutation.write_table("| new |", page)


def test_without_a_record_the_command_says_what_to_run_and_exits_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(mutation, "RECORD", tmp_path / "none.json")
    assert mutation.main(["table"]) == 2
    assert "run `python -m devtools.mutation run` first" in capsys.readouterr().err


@PROMISE
def test_docs_mutation_md_holds_the_table_the_command_makes_from_the_committed_record():
    """The page's table is what `python -m devtools.mutation table` writes from devtools/mutation_results.json and
    the source as it is: a row for every module of src/ and hydra_plugins/, a stale one said so."""
    text = (REPO / "docs" / "mutation.md").read_text(encoding="utf-8")
    assert text.count(mutation.BEGIN) == 1 and text.count(mutation.END) == 1
    shown = text.split(mutation.BEGIN)[1].split(mutation.END)[0].strip()
    made = mutation.table(mutation.load_record(), mutation.source_hashes(), mutation.load_equivalent())
    assert shown == made.strip(), "docs/mutation.md's table is not today's: run `python -m devtools.mutation table`"
    rows = {row.split(" | ")[0].removeprefix("| ").strip("`") for row in made.splitlines() if row.startswith("| `")}
    counted = rows | {path for path, module in mutation.load_record().items() if not module.mutants}
    assert set(mutation.source_files()) <= counted, "every module of src/ and hydra_plugins/ has a row or a line"


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


def test_count_records_every_modules_mutants_as_mutmut_makes_them_keeping_judged_rows(tmp_path):
    """`count`: each module's mutants are mutmut's own for the whole file, none judged; a row recorded for the same
    text stays as it is, one for another text is counted again."""
    from mutmut.mutation.file_mutation import mutate_file_contents

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "toy.py").write_text("def f(a, b=2):\n    return a + b * 3 if a > 1 else 'x'\n")
    (tmp_path / "src" / "kept.py").write_text("def g(n):\n    return n - 1\n")
    hashes = mutation.source_hashes(tmp_path)
    judged = mutation.Module("src/kept.py", 2, killed=2, sha256=hashes["src/kept.py"])
    stale = mutation.Module("src/toy.py", 1, killed=1, sha256="another text")
    out = mutation.counted({"src/kept.py": judged, "src/toy.py": stale}, hashes, tmp_path)
    n = len(mutate_file_contents("src/toy.py", (tmp_path / "src" / "toy.py").read_text(), None, None).mutant_names)
    assert n > 0 and out["src/toy.py"] == mutation.Module("src/toy.py", n, not_run=n, sha256=hashes["src/toy.py"])
    assert out["src/kept.py"] == judged
