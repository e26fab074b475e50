"""The Slurm tier on a cluster without accounting (`slurm_up.sh --no-accounting`: no slurmdbd, `sacct` fails, as on
some clusters): a cancelled array task is still reported, with Slurm's state, within two minutes, where submitit
alone would wait for it forever. Runs after tests/test_slurm_cluster.py, whose cluster is stopped by then (one
module's cluster at a time: they share Slurm's ports). Opt-in as that tier: --run-slurm or MCQ_TEST_SLURM=1.
"""
from __future__ import annotations

import pytest

from .test_slurm_cluster import SLOW, cluster_up, scancel_job_1, server  # noqa: F401 - server: the fixture


@pytest.fixture(scope="module")
def slurm_without_accounting():
    with cluster_up("--no-accounting") as cluster:
        yield cluster


@pytest.mark.slurm
@pytest.mark.slow
def test_scancel_without_accounting(slurm_without_accounting, server, tmp_path):
    with pytest.raises(Exception):  # sacct has nothing to ask
        slurm_without_accounting.run("sacct", "-n")
    ended = scancel_job_1(slurm_without_accounting, server.uri, tmp_path, "slurm-noacct",
                          ("temperature=0.3,0.5", "limit=200", *SLOW, "tracking.experiment=slurm-noacct"), jobs=2)
    print(f"\nscancel without accounting: the sweep ended {ended:.1f} s later, exit 2")
