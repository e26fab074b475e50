"""The Slurm tier on a cluster without accounting (`slurm_up.sh --no-accounting`: no slurmdbd, `sacct` fails, as on
some clusters): a cancelled array task is still reported, with Slurm's state, within two minutes, where submitit
alone would wait for it forever; also under the plugin's own name, `hydra/launcher=submitit_slurm`,
which runs the project's launcher with the plugin's keys. Runs after tests/test_slurm_cluster.py, whose cluster is
stopped by then (one module's cluster at a time: they share Slurm's ports). Opt-in as that tier: --run-slurm or
MCQ_TEST_SLURM=1.
"""

from __future__ import annotations

import subprocess

import pytest

# F401: `server` is a fixture, imported for the tests that name it
from .test_slurm_cluster import SLOW, cluster_up, scancel_job_1, server, summary, sweep  # noqa: F401


@pytest.fixture(scope="module")
def slurm_without_accounting():
    with cluster_up("--no-accounting") as cluster:
        yield cluster


@pytest.mark.promise(
    "docs/clusters.md", "a cancelled job is reported where sacct has no accounting, not waited on forever"
)
@pytest.mark.slurm
@pytest.mark.slow
def test_scancel_without_accounting(slurm_without_accounting, server, tmp_path):
    with pytest.raises(subprocess.CalledProcessError):  # sacct has nothing to ask
        slurm_without_accounting.run("sacct", "-n")
    ended = scancel_job_1(
        slurm_without_accounting,
        server.uri,
        tmp_path,
        "slurm-noacct",
        ("temperature=0.3,0.5", "limit=200", *SLOW, "tracking.experiment=slurm-noacct"),
        jobs=2,
    )
    print(f"\nscancel without accounting: the sweep ended {ended:.1f} s later, exit 2")


@pytest.mark.promise("docs/clusters.md", "under hydra/launcher=submitit_slurm a cancelled job is one line too")
@pytest.mark.slurm
@pytest.mark.slow
def test_scancel_under_the_plugins_own_name(slurm_without_accounting, server, tmp_path):
    """`hydra/launcher=submitit_slurm` as a Hydra user types it from habit: the cancellation ends the sweep as under
    the project's `slurm_cpu` (one `error: job #1` line naming CANCELLED, exit 2, within two minutes), not the plugin's
    endless wait. Then the same command completes the sweep."""
    args = ("temperature=0.3,0.5", "limit=200", *SLOW, "tracking.experiment=slurm-plugin-name")
    ended = scancel_job_1(
        slurm_without_accounting, server.uri, tmp_path, "slurm-plugin-name", args, jobs=2, launcher="submitit_slurm"
    )
    again = sweep(slurm_without_accounting, server.uri, tmp_path, *args, launcher="submitit_slurm")
    assert again.returncode == 0, again.stderr[-5000:]
    assert ": 2 job(s), 1 finished, 1 skipped, 0 failed" in summary(again.stderr)
    print(f"\nscancel under hydra/launcher=submitit_slurm: the sweep ended {ended:.1f} s later, exit 2")
