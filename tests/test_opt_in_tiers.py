"""Opt-in tiers (tests/conftest.py, OPT_IN_TIERS): skipped, saying how to run them, unless asked for; asked for by
their flag or environment variable, a missing dependency fails the test (never a skip), in the test or a fixture."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .conftest import OPT_IN_TIERS

pytest_plugins = ["pytester"]

TIER_TESTS = """
import pytest

pytestmark = pytest.mark.{marker}


@pytest.fixture
def server():
    pytest.importorskip("mcq_no_such_driver", reason="mcq_no_such_driver is not installed: pip install it")


def test_needs_a_driver(server):
    pass


def test_needs_a_binary():
    pytest.skip("no mcq-no-such-binary on PATH")


def test_has_what_it_needs():
    pass
"""


def run_tier(pytester, marker: str, *args: str):
    pytester.makepyfile(test_tier=TIER_TESTS.format(marker=marker))
    return pytester.runpytest_inprocess(
        "--disable-plugin-autoload",
        "-p",
        "tests.conftest",
        "-p",
        "no:cacheprovider",
        "-W",
        "ignore::pytest.PytestAssertRewriteWarning",
        *args,
    )


@pytest.mark.parametrize("marker", sorted(OPT_IN_TIERS))
def test_a_tier_not_asked_for_is_skipped_saying_how_to_run_it(pytester, marker):
    tier = OPT_IN_TIERS[marker]
    result = run_tier(pytester, marker, "-rs")
    result.assert_outcomes(skipped=3)
    assert f"{marker} tier, opt-in: add {tier.option} or set {tier.env}=1 ({tier.setup})" in result.stdout.str()


@pytest.mark.promise(
    "docs/mlflow_ui.md", "the browser tier asked for without Playwright or Chromium fails rather than skips"
)
@pytest.mark.parametrize("marker", sorted(OPT_IN_TIERS))
@pytest.mark.parametrize("how", ["flag", "env"])
def test_a_tier_asked_for_fails_where_a_dependency_is_missing(pytester, monkeypatch, marker, how):
    tier = OPT_IN_TIERS[marker]
    monkeypatch.delenv(tier.env, raising=False)
    if how == "env":
        monkeypatch.setenv(tier.env, "1")
    result = run_tier(pytester, marker, *([tier.option] if how == "flag" else []))
    result.assert_outcomes(passed=1, failed=1, errors=1)  # the fixture's skip is an error at setup
    asked = f"{marker} tier asked for ({tier.option} or {tier.env}=1) but it cannot run: "
    out = result.stdout.str()
    assert asked + "mcq_no_such_driver is not installed: pip install it (" in out  # its own reason, then the setup
    assert asked + f"no mcq-no-such-binary on PATH ({tier.setup.partition(';')[0]})" in out


@pytest.mark.promise("docs/development.md", "CI runs each opt-in tier's files with its flag: a missing service fails")
def test_ci_asks_for_each_tier_on_every_file_of_its_tests():
    """Each file with tests of a tier is run by .ci/run with the tier's flag, so a service the tier cannot start fails
    CI instead of skipping there; a file of a tier that .ci/run does not run would test nothing anywhere."""
    repo = Path(__file__).resolve().parents[1]
    ci_run = (repo / ".ci" / "run").read_text()
    asked = {  # test file -> the flags .ci/run gives the pytest command that runs it
        file: set(flags.split())
        for files, flags in re.findall(r"python -m pytest -n 0 ((?:tests/\S+\.py )+)((?:--run-[a-z-]+ ?)+)", ci_run)
        for file in files.split()
    }
    for path in sorted((repo / "tests").glob("test_*.py")):
        if path.name == Path(__file__).name:  # this file's tier tests are pytester's, on made-up files
            continue
        marks = set(re.findall(r"pytest\.mark\.([a-z_]+)\b", path.read_text())) & OPT_IN_TIERS.keys()
        for marker in sorted(marks):
            name = f"tests/{path.name}"
            assert OPT_IN_TIERS[marker].option in asked.get(name, set()), (
                f"{name} has {marker} tests but .ci/run runs it without {OPT_IN_TIERS[marker].option}"
            )
    assert len(asked) >= len(OPT_IN_TIERS)  # every tier has a file .ci/run runs (Slurm has two)
