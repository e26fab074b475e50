"""A real PostgreSQL-backed `mlflow server`, killed mid-sweep and restarted: the rerun of the same command resumes
and every trial is in the store exactly once, no run left RUNNING.

PostgreSQL comes from the `pgserver` wheel (`pip install -e ".[server-test]"`: the server binaries inside a PyPI
package) or from the system's `initdb`/`pg_ctl` (Debian's `postgresql` package), started on a Unix socket in a
temporary folder (the `postgres` fixture says which is tried first). The MLflow server reaches it through
`postgresql+psycopg2://` (the `server` extra's driver), listens on 127.0.0.1 and is killed by the process group this
test started.

Opt-in tier (about 2 minutes on 2 cores): `python -m pytest tests/test_postgres_server.py --run-postgres` (or
`MCQ_TEST_POSTGRES=1`); `.ci/run` runs it as its third step. Asked for, it fails without a PostgreSQL or its
driver, saying what to install (tests/conftest.py turns a skip in an asked-for tier into a failure).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from .conftest import REPO
from .mlflow_server import MlflowServer

pytestmark = [pytest.mark.postgres, pytest.mark.slow]  # two PostgreSQL-backed server starts and two sweeps

JOBS = ("0", "1", "2", "3")  # seed=0,1,2,3: a 4-job sweep
LIMIT = 8  # questions per job; variants=original, repetitions=1: 8 trials a job


def _system_pg_bin() -> Path | None:
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb", path=str(Path(found).resolve().parent)):
        return Path(found).resolve().parent
    dirs = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"),
        reverse=True,
        key=lambda d: [int(x) for x in Path(d).parent.name.split(".") if x.isdigit()],
    )
    return next((Path(d) for d in dirs if (Path(d) / "initdb").exists() and (Path(d) / "pg_ctl").exists()), None)


@contextlib.contextmanager
def _pgserver(data: Path):
    """PostgreSQL from the pgserver wheel (as root, pgserver runs it as a `pgserver` user it adds)."""
    import pgserver

    server = pgserver.get_server(data, cleanup_mode="stop")
    try:
        server.psql("CREATE DATABASE mlflow;")
        yield
    finally:
        server.cleanup()  # pg_ctl stop on this data folder


@contextlib.contextmanager
def _system_postgres(data: Path, bindir: Path):
    """PostgreSQL from the system's initdb/pg_ctl (as root, run as the package's `postgres` user)."""
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if as_user:
        user = pwd.getpwnam("postgres")
        os.chmod(data.parent, 0o755)
        data.mkdir(mode=0o700)
        os.chown(data, user.pw_uid, user.pw_gid)
    subprocess.run(
        [*as_user, str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "--encoding=utf8"],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            *as_user,
            str(bindir / "pg_ctl"),
            "-D",
            str(data),
            "-w",
            "-l",
            str(data / "log"),
            "-o",
            f"-h '' -k {data}",
            "start",
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    try:
        subprocess.run(
            [*as_user, str(bindir / "psql"), "-h", str(data), "-U", "postgres", "-c", "CREATE DATABASE mlflow;"],
            check=True,
            capture_output=True,
        )
        yield
    finally:
        subprocess.run(
            [*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-w", "-m", "fast", "stop"],
            capture_output=True,
            timeout=60,
        )


@pytest.fixture(scope="module")
def postgres():
    """A fresh PostgreSQL listening only on a Unix socket in a temporary folder; yields its
    `postgresql+psycopg2://` URI (database mlflow). The pgserver wheel first; as root the system's PostgreSQL
    first when it has its `postgres` user, sparing pgserver's useradd and the chmod of its install path's folders.
    `MCQ_TEST_POSTGRES_FROM=pgserver` or `=system` picks one."""
    try:
        import psycopg2  # noqa: F401 - the driver of postgresql+psycopg2:// (the `server` extra)
    except ImportError:
        pytest.skip('psycopg2 is not installed: pip install -e ".[server-test]"')
    try:
        import pgserver  # noqa: F401

        has_pgserver = True
    except ImportError:
        has_pgserver = False
    bindir = _system_pg_bin()
    try:
        has_system = bindir is not None and (os.geteuid() != 0 or bool(pwd.getpwnam("postgres")))
    except KeyError:  # root and no postgres user to run it as
        has_system = False
    order = ["system", "pgserver"] if os.geteuid() == 0 else ["pgserver", "system"]
    wanted = os.environ.get("MCQ_TEST_POSTGRES_FROM")
    available = [
        k for k in ([wanted] if wanted else order) if {"pgserver": has_pgserver, "system": has_system}.get(k, False)
    ]
    if not available:
        pytest.skip(
            f'no PostgreSQL{f" from {wanted}" if wanted else ""}: pip install -e ".[server-test]" '
            "(the pgserver wheel) or install the system's postgresql package (initdb, pg_ctl)"
        )
    root = Path(tempfile.mkdtemp(prefix="mcq-pg-"))  # short: a Unix socket path is at most 107 bytes
    data = root / "data"
    try:
        with _pgserver(data) if available[0] == "pgserver" else _system_postgres(data, bindir):
            yield f"postgresql+psycopg2://postgres@/mlflow?host={data}"
    finally:
        shutil.rmtree(root, ignore_errors=True)


def job_statuses(store: str) -> list[str]:
    """Statuses of the job runs (tag kind=job) in the PostgreSQL store, read straight from the database."""
    import sqlalchemy as sa

    engine = sa.create_engine(store)
    try:
        with engine.connect() as conn:
            return [
                row[0]
                for row in conn.execute(
                    sa.text(
                        "SELECT r.status FROM runs r JOIN tags t ON t.run_uuid = r.run_uuid "
                        "WHERE t.key = 'kind' AND t.value = 'job'"
                    )
                )
            ]
    except sa.exc.ProgrammingError:  # the server has not made its tables yet
        return []
    finally:
        engine.dispose()


def test_postgres_server_killed_mid_sweep_and_resumed(postgres, tmp_path):
    from mlflow.tracking import MlflowClient

    from src.tracking.records import read_run_records

    server = MlflowServer(postgres, tmp_path, what="against PostgreSQL")
    try:
        first_start_s = server.start()
        # 4 jobs, 2 at a time; each asks 8 questions at 0.5 s a question, so jobs are computing when the server goes
        cmd = [
            sys.executable,
            "-m",
            "src.run",
            "-m",
            "model=simulated",
            "model.latency_ms=500",
            f"limit={LIMIT}",
            f"seed={','.join(JOBS)}",
            "hydra/launcher=joblib",
            "hydra.launcher.n_jobs=2",
            f"tracking.uri={server.uri}",
            "tracking.experiment=pg-sweep",
            "tracking.retry_budget_s=3",
            f"tracking.offline_dir={tmp_path}/offline",
            f"cache.path={tmp_path}/cache.db",
            f"hydra.sweep.dir={tmp_path}/multirun",
        ]
        env = {**os.environ, "TQDM_DISABLE": "1"}
        sweep = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        deadline = time.time() + 240
        while True:  # mid-sweep: a job has finished and another is computing
            statuses = job_statuses(postgres)
            if "FINISHED" in statuses and "RUNNING" in statuses:
                break
            assert sweep.poll() is None and time.time() < deadline, (
                f"the sweep ended before the kill ({statuses}):\n{sweep.communicate()[1][-5000:]}"
            )
            time.sleep(0.2)
        server.kill()
        _, err1 = sweep.communicate(timeout=300)
        assert sweep.returncode == 2 and "Traceback" not in err1, err1[-5000:]  # jobs failed with one line each
        assert "stopped answering" in err1 or "is unreachable" in err1, err1[-5000:]
        summary1 = next(ln for ln in err1.splitlines() if ln.startswith("sweep "))
        assert ": 4 job(s), " in summary1 and " 0 failed" not in summary1, err1[-5000:]

        restart_s = server.start()  # the same port, the same PostgreSQL store
        again = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=env, timeout=400)
        assert again.returncode == 0 and "Traceback" not in again.stderr, again.stderr[-5000:]
        summary2 = next(ln for ln in again.stderr.splitlines() if ln.startswith("sweep "))
        assert ": 4 job(s), " in summary2 and " 0 failed" in summary2, again.stderr[-5000:]
        assert " 0 skipped" not in summary2, summary2  # the jobs that had finished before the kill are not rerun

        client = MlflowClient(tracking_uri=server.uri)
        runs = client.search_runs([client.get_experiment_by_name("pg-sweep").experiment_id])
        assert not [(r.info.run_id, r.data.tags.get("kind")) for r in runs if r.info.status == "RUNNING"], (
            err1[-3000:] + again.stderr[-3000:]
        )
        jobs = [r for r in runs if r.data.tags.get("kind") == "job"]
        finished = [r for r in jobs if r.info.status == "FINISHED"]
        assert sorted(r.data.params["seed"] for r in finished) == list(JOBS)  # every job, exactly once
        assert {r.info.status for r in jobs if r not in finished} <= {"FAILED", "KILLED"}  # runs the kill cut
        parents = [r for r in runs if r.data.tags.get("kind") == "sweep"]
        assert len(parents) == 1 and parents[0].info.status == "FINISHED", [p.info for p in parents]
        assert {r.data.tags["mlflow.parentRunId"] for r in finished} == {parents[0].info.run_id}
        for run in finished:
            records = read_run_records(run.info.run_id, server.uri)
            assert len(records) == run.data.metrics["n_trials"] == LIMIT
            assert not records.duplicated(["question_id", "variant_id", "repetition"]).any()
        print(
            f"\nmlflow server against PostgreSQL: first start {first_start_s:.1f} s, restart {restart_s:.1f} s; "
            f"{summary1!r} -> {summary2!r}"
        )
    finally:
        server.kill()
