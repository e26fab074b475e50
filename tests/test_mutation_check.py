"""`python -m tests.mutation` (docs/mutation.md): the mutants it makes are valid Python that differs from the
original, `--list` names them without running anything, and a run mutates a copy of the tree only."""

from __future__ import annotations

import ast

import pytest

from tests import mutation

from .conftest import REPO


def test_mutants_compile_and_change_their_module():
    """Every target has mutants in the functions it names; eight of each, spread over them, are valid Python that
    differs from the original (all of them: some hundred unparsings, too slow for the edit loop)."""
    for target in mutation.TARGETS:
        original = ast.unparse(ast.parse((REPO / target.path).read_text(encoding="utf-8")))
        found = mutation.mutants(target)
        assert found, f"{target.path}: no mutant in {target.functions} (a function renamed?)"
        assert {m.function for m in found} <= set(target.functions or {m.function for m in found})
        for mutant in found[:: max(1, len(found) // 8)]:
            source = mutation.mutated_source(mutant)
            compile(source, mutant.label, "exec")
            assert source != original, mutant.label
        assert all((REPO / test).is_file() for test in target.tests), target.tests


def test_list_names_the_chosen_mutants(capsys):
    resume = [t for t in mutation.TARGETS if t.name == "resume"]
    total = sum(len(mutation.mutants(t)) for t in resume)
    assert mutation.main(["--target", "resume", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == f"{total} of {total} mutants"
    assert all(line.startswith("src/tracking/runs.py:") for line in lines[:-1])
    assert mutation.main(["--target", "resume", "--list", "--sample", "3", "--seed", "1"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"3 of {total} mutants"


@pytest.mark.slow  # two pytest processes (the unmutated tests, then the mutant's)
def test_a_mutant_is_run_in_a_copy_and_killed(capsys):
    """bootstrap_p_value's `d <= 0` made `d < 0` (a run against itself then gets p = 2/(B+1), not 1): killed by
    tests/test_paired.py, and the worktree's module is as it was."""
    (target,) = [t for t in mutation.TARGETS if t.path == "src/metrics/paired.py"]
    (mutant,) = [m for m in mutation.mutants(target) if m.function == "bootstrap_p_value" and m.what == "<= -> <"]
    before = (REPO / mutant.target.path).read_text(encoding="utf-8")
    assert mutation.main(["--target", "paired", "--match", mutant.label]) == 0
    out = capsys.readouterr().out
    assert f"] killed {mutant.label} (" in out and "score: 1/1 killed (100.0%)" in out
    assert (REPO / mutant.target.path).read_text(encoding="utf-8") == before


def test_the_commands_of_docs_mutation_md_select_what_it_says(capsys):
    """Each `python -m tests.mutation` command of the page, with --list added: it parses and picks its mutants
    (running them is on demand: minutes to an hour; the slow test above runs one end to end)."""
    import shlex

    text = (REPO / "docs" / "mutation.md").read_text(encoding="utf-8").replace("\\\n", " ")
    commands = [line.split("#")[0].strip() for line in text.splitlines() if line.startswith("python -m tests.mutation")]
    named = {args[i + 1] for args in map(shlex.split, commands) for i, arg in enumerate(args) if arg == "--target"}
    assert named == {target.name for target in mutation.TARGETS}, "every target has a command on the page, no other"
    for command in commands:
        args = shlex.split(command)[3:]
        assert mutation.main([*args, "--list"]) == 0, command
        lines = capsys.readouterr().out.splitlines()
        chosen, _, total = lines[-1].removesuffix(" mutants").partition(" of ")
        assert int(chosen) == len(lines) - 1 > 0, command
        if "--sample" in args:
            assert int(chosen) == int(args[args.index("--sample") + 1]) < int(total), command
        if "--target" in args and "resume" in args:
            assert all(line.startswith("src/tracking/runs.py:") for line in lines[:-1])
        if "--match" in args:
            assert all(line.startswith(args[args.index("--match") + 1]) for line in lines[:-1])
