"""Every warning docs/ and README describe a user seeing, triggered as cheaply as its code allows, in-process, with the
root logger configured as a job's (Hydra's job_logging with conf/config.yaml's console on stderr): one line on stderr,
nothing on stdout ("stdout is data"). The job as a subprocess, two of these warnings in the order they
happen: tests/test_job_stderr.py.

| warning (where the docs describe it) | case below |
|---|---|
| duplicate option texts, named with their count (docs/validity.md) | `duplicate options` |
| a loader whose answers sit in one slot (docs/validity.md) | `fixed answer slot` |
| a served model that reports nothing that changes with its weights (docs/serving.md, docs/tracking.md) | `served` |
| a `system_fingerprint` that changes during a sweep (docs/serving.md, docs/tracking.md) | `fingerprint` |
| the INVALID lump: tokens outside the top log-probabilities as one (docs/speed.md) | `invalid lump` |
| prefix sharing turned off (docs/speed.md) | `prefix sharing off` |
| an lm-eval task's skipped documents, and its targets read as indices (docs/configuration.md) | `lm-eval ...` |
| an adapter's library outside its range (docs/development.md, src/common/versions.py) | `adapter version` |
| an MLflow server that is not answering, `tracking.on_outage=offline` (docs/tracking.md) | `mlflow outage` |

Not here, and why: a lost or cancelled job of a Ray/Slurm sweep (docs/clusters.md, "prints one line for it") is a
job's error line in the submitting process, not a warning, tested by the cluster tiers (tests/test_ray_cluster.py);
a run at chance is a flag of the closing block and the review (docs/review.md), on stderr with the block
(tests/test_job_stderr.py); the "model files unchanged since run ..." and "saying so in one line" lines of
docs/tracking.md and docs/configuration.md are INFO lines (tests/test_content_identity.py). The vLLM backend's
own INVALID-lump line is the same rule as the served one's, and needs vLLM (a GPU).
"""

from __future__ import annotations

import contextlib
import json
import logging
import logging.config
import os
import re
import shutil
from pathlib import Path

import hydra
import pytest
from omegaconf import OmegaConf

from src.backends.base import Request

from .conftest import REPO
from .test_hf_backend import tiny_model_dir  # noqa: F401  (fixture, for the prefix-sharing case)

LOG_LINE = re.compile(r"\[\d{4}-\d\d-\d\d [\d:,]+\]\[src\.[\w.]+\]\[WARNING\] - \S.*")


@contextlib.contextmanager
def job_logging():
    """The root logger as a job's: Hydra's default job_logging, less its file handler, with this project's
    conf/config.yaml override (console on sys.stderr, resolved now: pytest's captured stderr)."""
    default = OmegaConf.load(Path(hydra.__file__).parent / "conf" / "hydra" / "job_logging" / "default.yaml")
    ours = OmegaConf.load(REPO / "conf" / "config.yaml").hydra.job_logging
    config = OmegaConf.to_container(OmegaConf.merge(default, ours))
    del config["handlers"]["file"]
    config["root"]["handlers"] = ["console"]
    root = logging.getLogger()
    kept = root.handlers[:], root.level
    logging.config.dictConfig(config)
    try:
        yield
    finally:
        root.handlers[:] = kept[0]
        root.setLevel(kept[1])


def write_jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def duplicate_options(tmp_path, monkeypatch, request):
    """medmcqa's reader keeps duplicates (the generic one refuses them: the file is the user's own)."""
    from src.benchmarks import load_benchmark

    rows = [{"question": f"Q{i}?", "choices": ["A. x", "B. x", "C. y"], "answer": 2 - i % 2} for i in range(2)]
    load_benchmark("medmcqa", path=write_jsonl(tmp_path / "medmcqa.jsonl", rows), data_dir=str(tmp_path))
    return "medmcqa: 2 questions have duplicate option texts (medmcqa/0, medmcqa/1)"


def fixed_answer_slot(tmp_path, monkeypatch, request):
    from src.benchmarks import load_benchmark

    rows = [
        {"id": f"q{i}", "question": f"Q{i}?", "options": [f"a{i}", f"b{i}", f"c{i}"], "answer": 2} for i in range(20)
    ]
    load_benchmark("generic", path=write_jsonl(tmp_path / "b.jsonl", rows), data_dir=str(tmp_path))
    return "the answer is in slot C for 100% of 20 questions"


def served_model(name: str = "m", **extra):
    from src.backends.openai_backend import OpenAIBackend, OpenAISettings

    from .test_content_identity import ModelServer

    server = ModelServer()
    server.model = {"id": name, "created": 0, "root": "/ckpt/last"}
    backend = OpenAIBackend(
        OpenAISettings(name="served", model=name, base_url=server.url, api_key_env=None, progress=False, **extra)
    )
    return server, backend


def served(tmp_path, monkeypatch, request):
    server, backend = served_model()
    try:
        assert backend.identity
    finally:
        server.close()
    return "reports nothing that changes with the weights"


def fingerprint(tmp_path, monkeypatch, request):
    from src.backends.base import SamplingParams

    server, backend = served_model(max_concurrency=1, revision="step-1")
    server.fingerprints = ["fp_1", "fp_2"]
    try:
        for _ in range(2):
            backend.generate([Request("Q?", ("A", "B"), ("x", "y"), seed=0)], SamplingParams())
    finally:
        server.close()
    return "system_fingerprint changed from fp_1 to fp_2"


def invalid_lump(tmp_path, monkeypatch, request):
    server, backend = served_model(revision="step-1", top_logprobs=2)
    server.top = {"A": -0.2, "B": -1.9}
    try:
        from src.backends.base import SamplingParams

        asked = [Request("Q?", ("A", "B", "C"), ("x", "y", "z"), seed=0)]
        [scores] = backend.score_labels(asked, SamplingParams(temperature=1.0))
    finally:
        server.close()
    assert scores.probs[0] > scores.probs[1]
    return "rebuilt from the top 2 tokens"


def prefix_sharing_off(tmp_path, monkeypatch, request):
    from .test_hf_backend import tiny

    backend = tiny(request.getfixturevalue("tiny_model_dir"), batch_size=2)
    backend.load()
    backend.model.config.sliding_window = 4  # prompts longer than a sliding window: packing would need its mask
    backend.score_labels([Request("Question: 2+2?\nA. 3\nB. 4\nAnswer:", ("A", "B"), ("3", "4"), seed=0)])
    return "prefix sharing off, prompts are longer than the sliding window (4)"


def lm_eval_task(tmp_path, monkeypatch, request):
    """A stand-in task (lm-eval's interface, tests/test_lm_eval_benchmark.py) in place of lm-eval's task manager."""
    from types import SimpleNamespace

    from src.benchmarks import lm_eval

    from .test_lm_eval_benchmark import DOCS, StandInTask

    docs = [*DOCS, {"q": "Which digit?", "choices": ["1", "2", "3", "4"], "target": 3}]
    task = StandInTask(docs)
    task.config, task.eval_docs = SimpleNamespace(test_split="test", validation_split=None), docs
    monkeypatch.setattr(lm_eval, "load_tasks", lambda name, include_path=None: {"stand_in": task})
    lm_eval.load_lm_eval(path=None, data_dir=str(tmp_path), split=None, seed=0, options={"task": "stand_in"})


def lm_eval_skipped(tmp_path, monkeypatch, request):
    lm_eval_task(tmp_path, monkeypatch, request)
    return "lm_eval task stand_in: 3 of 6 documents skipped"


def lm_eval_index_target(tmp_path, monkeypatch, request):
    lm_eval_task(tmp_path, monkeypatch, request)
    return "documents have a target that lm-eval reads as an option index"


def adapter_version(tmp_path, monkeypatch, request):
    """The line an adapter prints when imported (importing one twice in a process would copy its classes: the
    import itself, in a fresh process, is tests/test_framework_adapters.py's), with hydra-core's version faked."""
    import importlib.metadata

    from src.common import versions
    from src.config import hydra_adapter

    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "1.4.0" if name == "hydra-core" else real(name))
    versions.warn_if_outside("hydra-core", hydra_adapter.SUPPORTED, hydra_adapter.ADAPTER)
    return "warning: hydra-core 1.4.0 is outside >=1.3.2,<1.4"


def mlflow_outage(tmp_path, monkeypatch, request):
    """A server address nothing listens on; the offline store is the suite's template (no migrations)."""
    from src.tracking.job_tracker import JobTracker
    from src.tracking.store import TrackingOptions

    from .test_tracking_outage import free_port

    for name in (
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES",
        "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR",
        "MLFLOW_HTTP_REQUEST_TIMEOUT",
    ):
        monkeypatch.setenv(name, os.environ.get(name, ""))  # restored after: the tracker sets them
    (tmp_path / "offline").mkdir()
    shutil.copyfile(request.getfixturevalue("empty_mlflow_db"), tmp_path / "offline" / "mlflow.db")
    cfg = {"uri": f"http://127.0.0.1:{free_port()}", "on_outage": "offline", "offline_dir": str(tmp_path / "offline")}
    options = TrackingOptions.of({**cfg, "experiment": "e", "retry_budget_s": 1, "offline": False})
    tracker = JobTracker(options, job_hash="h")
    assert tracker.fell_back
    return "is not answering; this job logs to"


CASES = {
    "duplicate options": duplicate_options,
    "fixed answer slot": fixed_answer_slot,
    "served": served,
    "fingerprint": fingerprint,
    "invalid lump": invalid_lump,
    "prefix sharing off": prefix_sharing_off,
    "lm-eval skipped documents": lm_eval_skipped,
    "lm-eval target read as an index": lm_eval_index_target,
    "adapter version": adapter_version,
    "mlflow outage": mlflow_outage,
}


@pytest.mark.parametrize("case", CASES)
def test_each_warning_of_the_docs_is_one_line_on_stderr_and_none_on_stdout(
    case, tmp_path, monkeypatch, capsys, request
):
    capsys.readouterr()
    with job_logging():
        said = CASES[case](tmp_path, monkeypatch, request)
    out, err = capsys.readouterr()
    assert out == "", f"stdout is data, yet holds: {out!r}"
    lines = [line for line in err.splitlines() if said in line]
    assert len(lines) == 1, f"{said!r} not once on stderr:\n{err}"
    assert LOG_LINE.fullmatch(lines[0]) or lines[0].startswith("warning: "), lines[0]
