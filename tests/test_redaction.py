"""Secrets planted in the config reach no file a run writes: not MLflow's params, tags, artifacts or database, not
Hydra's .hydra/ folder or multirun.yaml, not the log. The rule itself is src/common/redact.py."""

from __future__ import annotations

import logging

import pytest
import yaml
from omegaconf import OmegaConf

from src.common.redact import RedactCallback, install_log_redaction, redact, redact_text, redact_yaml_file

from .test_openai_backend import FakeServer


@pytest.mark.parametrize(
    "text, secret, kept",
    [
        ("http://user:pw-1@127.0.0.1:9/v1", "pw-1", "http://***@127.0.0.1:9/v1"),
        ("https://ghp_tok1@github.com/x.git", "ghp_tok1", "https://***@github.com/x.git"),
        ("postgresql+psycopg2://mlflow:pw-2@db:5432/mlflow", "pw-2", "@db:5432/mlflow"),
        ("https://h/v1?api-version=2024&api_key=k-3", "k-3", "api-version=2024"),
        ("https://blob/x?sv=1&sig=s-4&se=2", "s-4", "&se=2"),
        ("https://s3/x?X-Amz-Credential=c-5&X-Amz-Signature=s-6", "c-5", "X-Amz-Signature=***"),
        ("+model.api_key=sk-7 seed=1", "sk-7", "seed=1"),
        ("{'hf_token': 'hf_8', 'name': 'x'}", "hf_8", "'name': 'x'"),
        ("Authorization: Bearer sk-live-9", "sk-live-9", "Authorization: Bearer ***"),
    ],
)
def test_rule_masks_secrets_and_keeps_the_rest(text, secret, kept):
    clean = redact_text(text)
    assert secret not in clean and kept in clean and "***" in clean


def test_tree_masks_secret_keys_not_their_neighbours():
    cfg = {
        "model": {
            "base_url": "http://u:p@h/v1",
            "api_key_env": "OPENAI_API_KEY",
            "password": 1234,
            "max_new_tokens": 3,
            "hf_token": None,
        },
        "tracking": {"uri": "sqlite:///mlruns/mlflow.db"},
    }
    assert redact(cfg) == {
        "model": {
            "base_url": "http://***@h/v1",
            "api_key_env": "OPENAI_API_KEY",
            "password": "***",
            "max_new_tokens": 3,
            "hf_token": None,
        },
        "tracking": {"uri": "sqlite:///mlruns/mlflow.db"},
    }
    assert redact(["a=1", "client_secret=x"]) == ["a=1", "client_secret=***"]


@pytest.mark.promise(
    "conf/config.yaml", "the redact callback masks secrets in log lines and in Hydra's .hydra/ and multirun.yaml files"
)
def test_log_records_and_hydra_files_are_rewritten(tmp_path, caplog):
    factory = logging.getLogRecordFactory()
    try:
        install_log_redaction()
        install_log_redaction()  # idempotent: one wrapper
        logging.getLogger("test.redact").warning("retry %s", "http://u:LOGSECRET@h/v1?token=LOGSECRET2")
    finally:
        logging.setLogRecordFactory(factory)
    assert "LOGSECRET" not in caplog.text and "http://***@h/v1?token=***" in caplog.text

    out, sweep = tmp_path / "0", tmp_path
    (out / ".hydra").mkdir(parents=True)
    planted = "http://u:FILESECRET@h/v1"
    (out / ".hydra" / "config.yaml").write_text(yaml.safe_dump({"model": {"base_url": planted, "n": 1}}))
    (out / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump([f"model.base_url={planted}", "+model.api_key=k"]))
    (out / ".hydra" / "hydra.yaml").write_text("hydra:\n  run:\n    dir: outputs\n")  # nothing secret: untouched
    (sweep / "multirun.yaml").write_text(yaml.safe_dump({"hydra": {"overrides": {"task": [f"x={planted}"]}}}))
    config = OmegaConf.create(
        {
            "hydra": {
                "output_subdir": ".hydra",
                "runtime": {"output_dir": str(out)},
                "mode": "MULTIRUN",
                "sweep": {"dir": str(sweep)},
            }
        }
    )
    before = (out / ".hydra" / "hydra.yaml").stat().st_mtime_ns
    try:
        RedactCallback().on_job_start(config)
    finally:
        logging.setLogRecordFactory(factory)
    for path in [*(out / ".hydra").iterdir(), sweep / "multirun.yaml"]:
        assert "SECRET" not in path.read_text() and path.name[0] != ".", path
    assert yaml.safe_load((out / ".hydra" / "overrides.yaml").read_text()) == [
        "model.base_url=http://***@h/v1",
        "+model.api_key=***",
    ]
    assert (out / ".hydra" / "hydra.yaml").stat().st_mtime_ns == before
    assert redact_yaml_file(out / ".hydra" / "config.yaml") is False  # already clean


@pytest.mark.slow
def test_planted_keys_in_model_base_url_reach_no_file(run_cli, tmp_path):
    """No key reaches a file: a sweep of two jobs against a fake OpenAI-compatible server on
    127.0.0.1. Job 0 puts keys in the query string of `model.base_url` and finishes; job 1 puts a password in its
    user info, which urllib cannot send, so it retries once (a warning naming the URL) and fails. Then every
    file under the test's folder (Hydra's, MLflow's database and artifacts, the response cache) is read."""
    secrets = ["QSECRET-api-key-4711", "QSECRET-sig-4712", "USECRET-password-4713"]
    with FakeServer() as server:
        host = server.url.split("//", 1)[1]
        query = f"{server.url}?api_key={secrets[0]}&sig={secrets[1]}"
        userinfo = f"http://planted:{secrets[2]}@{host}"
        proc = run_cli(
            "model=openai",
            f"model.base_url='{query}','{userinfo}'",
            "model.api_key_env=null",
            "model.max_retries=1",
            "model.backoff_s=0.01",
            "benchmark=synthetic",
            "benchmark.n_questions=2",
            "scoring=logprob",
            multirun=True,
            check=False,
        )
    assert "cannot reach" in proc.stderr, proc.stderr[-3000:]  # job 1 ran, retried and failed
    assert any(path.endswith("/chat/completions") for path, _, _ in server.calls), "job 0 asked the server"
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {
        "mlflow.db",
        "multirun.yaml",
        "config.yaml",
        "overrides.yaml",
        "hydra.yaml",
        "records.parquet",
        "run.log",
        "cache.db",
    } <= names, names
    assert any(b"***@" in p.read_bytes() for p in files if p.name == "overrides.yaml"), "the planted value was kept"
    leaks = [(p.relative_to(tmp_path), s) for p in files for s in secrets if s.encode() in p.read_bytes()]
    assert leaks == []
    stdout_and_log = proc.stdout + "\n".join(ln for ln in proc.stderr.splitlines() if not ln.startswith("error:"))
    assert not any(s in stdout_and_log for s in secrets), "Hydra's and the job's log lines are masked"


def test_offline_runs_keep_no_credentials_and_sync_asks_for_them(run_job_in, tmp_path, capsys):
    """An offline run records where it will be uploaded without the store's password; `src.sync` then asks for
    the address with its credentials instead of uploading to a masked one."""
    from src.sync import main as sync

    offline = tmp_path / "offline"
    run_job_in(
        "model=simulated",
        "limit=2",
        "stats.bootstrap=0",
        "tracking.offline=true",
        f"tracking.offline_dir={offline}",
        "tracking.uri=http://user:S3CRET-PW@127.0.0.1:9",
    )
    assert not [p for p in offline.rglob("*") if p.is_file() and b"S3CRET-PW" in p.read_bytes()]
    assert sync(["--offline-dir", str(offline)]) == 2
    (line,) = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error:")]
    assert line.startswith("error: offline run ") and "pass --to URI" in line and "S3CRET" not in line
