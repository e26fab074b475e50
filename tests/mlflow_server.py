"""`mlflow server` started and stopped by a test tier (tests/test_postgres_server.py, tests/test_slurm_cluster.py)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from src.tracking.names import SERVER_ENV


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MlflowServer:
    """`mlflow server` on 127.0.0.1:port against `store`; `start()` waits for /health, `kill()` is SIGKILL to the
    process group this object started (the server and its uvicorn worker). `args` and `env` are added to the
    command and its environment (`--app-name basic-auth` and its MLFLOW_AUTH_CONFIG_PATH)."""

    def __init__(
        self, store: str, root: Path, *, what: str = "", args: tuple[str, ...] = (), env: dict[str, str] | None = None
    ) -> None:
        self.store, self.root, self.port = store, root, free_port()
        self.what, self.args, self.env = what, args, env or {}
        self.uri = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def start(self) -> float:
        began = time.time()
        self.starts += 1
        log = self.root / f"server-{self.starts}.log"
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mlflow",
                "server",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--backend-store-uri",
                self.store,
                "--artifacts-destination",
                str(self.root / "artifacts"),
                "--workers",
                "1",
                *self.args,
            ],
            stdout=subprocess.DEVNULL,
            stderr=open(log, "w"),
            start_new_session=True,
            env={**os.environ, **SERVER_ENV, **self.env},
        )
        deadline = time.time() + 180
        while True:
            try:
                urllib.request.urlopen(f"{self.uri}/health", timeout=2).read()
                return time.time() - began
            except OSError:
                if self.proc.poll() is not None or time.time() > deadline:
                    pytest.fail(f"mlflow server did not start {self.what}:\n{log.read_text()[-3000:]}")
                time.sleep(0.3)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        self.proc = None
