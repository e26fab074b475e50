"""The suite's own set-up holds: tests marked with an `xdist_group` run in one worker (pytest-xdist's
`--dist loadgroup`, pyproject.toml's addopts), so a group's shared fixtures (the real model's converted copy, the
smoke store, a run made under pinned kernels) are made once per suite, not once per worker."""

from __future__ import annotations

import os

import pytest


@pytest.mark.xdist_group("smollm2")
def test_a_test_of_a_group_is_run_under_its_group(request):
    distributed = request.config.getoption("loadgroup", default=False)
    # in one process (`-n 0`) there is nothing to distribute; under `-n N --dist loadgroup` xdist marks the test's id
    assert not distributed or request.node.nodeid.endswith("@smollm2"), (
        f"{request.node.nodeid} carries no @smollm2 under --dist loadgroup "
        f"(worker {os.environ.get('PYTEST_XDIST_WORKER')}):"
        " this pytest and pytest-xdist do not group tests; see the pin in pyproject.toml's test extra"
    )


def test_no_property_test_fails_for_its_speed():
    """Speed is what `python -m devtools.perf` measures: the suite's Hypothesis profile (tests/conftest.py) sets no
    per-example deadline, so a property test on a loaded machine fails only for what it checks."""
    from hypothesis import settings

    assert settings.default.deadline is None
