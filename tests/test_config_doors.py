"""One config check at three doors (src/config/checks.py `check_config`): `python -m src.run`'s check before Hydra
starts, the sweep callback's check of every job before the sweep's first, and the job itself. Every case of the
bad-input corpus (tests/test_bad_input_corpus.py) and the validity rules gets the same verdict at each door, so a
config accepted before Hydra starts is never refused inside a job, and the reverse."""

from __future__ import annotations

import pytest

from src.common.errors import UserError
from src.config.command_line import check_command_line
from src.config.compose import compose_job
from src.job.runner import run_job
from src.sweep.callback import refused_jobs

from .test_bad_input_corpus import COMPOSED_CASES, RANGE_CASES

VALIDITY_CASES = [  # scoring x variant set x sampling: refused by the validity rules (src/core/validity.py)
    ("scoring=cloze_shown temperature=0.7", "temperature would change nothing"),
    ("scoring=generate repetitions=10", "SURE by construction"),
    ("scoring=cloze variants=perm_cyclic", "scoring=cloze and variants=perm_cyclic"),
]
VALID = ["model=simulated", "limit=2"]  # accepted at every door
CASES = [(override, part) for override, _, part in COMPOSED_CASES + RANGE_CASES] + [
    (overrides, part) for overrides, part in VALIDITY_CASES
]


def verdicts(job: list[str], out_dir) -> dict[str, str | None]:
    """The error line each door gives `job` (None where it accepts it)."""
    found: dict[str, str | None] = {}
    try:
        check_command_line(job)
        found["command line"] = None
    except UserError as err:
        found["command line"] = str(err)
    try:
        cfg = compose_job(job)
    except UserError as err:  # composing is where the sweep and the job meet a wrong type too
        found["sweep"] = found["job"] = str(err)
        return found
    (line,) = refused_jobs([(job, cfg)]) or [None]
    found["sweep"] = line.removeprefix(f"job {' '.join(job)}: ") if line else None
    if found["command line"] is None and found["sweep"] is None:
        found["job"] = None  # accepted twice: the job would run (not run here)
        return found
    try:
        run_job(cfg, out_dir=str(out_dir))
        found["job"] = None
    except UserError as err:
        found["job"] = str(err)
    return found


@pytest.mark.parametrize("overrides, part", CASES, ids=[case[0] for case in CASES])
def test_each_door_gives_the_same_verdict(overrides, part, tmp_path):
    job = ["model=simulated", *overrides.format(tmp=tmp_path).split(" ")]
    found = verdicts(job, tmp_path / "job")
    assert found["command line"] is not None and part in found["command line"], found
    assert found["command line"] == found["sweep"] == found["job"], found
    assert not (tmp_path / "job").exists()  # refused before any compute or output


def test_a_valid_config_passes_the_two_pre_checks():
    assert verdicts(VALID, "unused") == {"command line": None, "sweep": None, "job": None}
