"""Secrets out of everything a run writes: the one rule, applied wherever the config leaves the process.

The rule (`redact` for a config tree, `redact_text` for a string):

- a URL's user info (`https://user:password@host`, `https://TOKEN@host`) becomes `***@`;
- the value of a query-string key with a secret's name (`?api_key=...`, `&sig=...`) becomes `***`;
- the value of any config key with a secret's name (`api_key`, `hf_token`, `client_secret`, `password`, ...)
  becomes `***`; in text, `name=value` (an override) and `Bearer <token>` are redacted alike.

Where it is applied: the params, tags and `config.yaml` artifact of a job (src/job/runner.py), the sweep parent's
logged config and overrides (src/sweep/callback.py), every log record of the process (`install_log_redaction`),
and Hydra's own files, which Hydra writes before the job starts: `RedactCallback` (conf/config.yaml,
`hydra.callbacks.redact`) rewrites `.hydra/config.yaml`, `hydra.yaml`, `overrides.yaml` and the sweep's
`multirun.yaml` as each job starts. An API key itself never is in the config: backends read it from the
environment variable their config names (`model.api_key_env`).

>>> redact_text("http://user:pw@127.0.0.1:9/v1?model=x&api_key=sk-1&sig=abc")
'http://***@127.0.0.1:9/v1?model=x&api_key=***&sig=***'
>>> redact({"model": {"base_url": "https://t0k@h/v1", "hf_token": "hf_x", "api_key_env": "OPENAI_API_KEY",
...                   "max_new_tokens": 3}})
{'model': {'base_url': 'https://***@h/v1', 'hf_token': '***', 'api_key_env': 'OPENAI_API_KEY', 'max_new_tokens': 3}}
>>> redact_text("+model.api_key=sk-1 seed=1 Authorization: Bearer sk-live-2")
'+model.api_key=*** seed=1 Authorization: Bearer ***'
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from src.common import owners

MASK = "***"
# A name whose value is a secret: it ends with one of these words (api_key, apiKey, hf_token, client_secret,
# X-Amz-Signature, ...); `api_key_env` (the name of a variable) and `max_new_tokens` do not.
_SECRET_NAME = re.compile(
    r"(?i)^[\w.+~-]*?(key|token|secret|password|passwd|pwd|credentials?|sig|signature|auth|"
    r"authorization|cookie|session)$"
)
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^\s/?#@'\"]+@")
_QUERY_PAIR = re.compile(r"([?&;#])([^=&#\s'\",?]+)=([^&#\s'\",]*)")
_TEXT_PAIR = re.compile(r"(?<![^\s,'\"(\[{])([+~]*[\w.-]+)=([^\s,'\")\]}]*)")
_QUOTED_PAIR = re.compile(r"""(['"])([\w.-]+)\1(\s*:\s*)(['"])([^'"]*)\4""")
_BEARER = re.compile(r"(?i)\b(bearer)(\s+)[A-Za-z0-9._~+/=-]{6,}")


def is_secret_name(name: Any) -> bool:
    """Whether a config key or query-string key names a secret (only the last dotted part counts).

    >>> [is_secret_name(k) for k in ("api_key", "model.hf_token", "api_key_env", "max_new_tokens", "top_k")]
    [True, True, False, False, False]
    """
    return bool(_SECRET_NAME.match(str(name).rsplit(".", 1)[-1]))


def redact_text(text: str) -> str:
    """`text` with URL user info, secret query-string values, `secret_name=value` pairs and bearer tokens masked."""
    if not isinstance(text, str) or not text:
        return text
    text = _USERINFO.sub(rf"\1{MASK}@", text)
    text = _QUERY_PAIR.sub(lambda m: f"{m[1]}{m[2]}={MASK}" if is_secret_name(m[2]) and m[3] else m[0], text)
    text = _TEXT_PAIR.sub(lambda m: f"{m[1]}={MASK}" if is_secret_name(m[1]) and m[2] else m[0], text)
    text = _QUOTED_PAIR.sub(
        lambda m: f"{m[1]}{m[2]}{m[1]}{m[3]}{m[4]}{MASK}{m[4]}" if is_secret_name(m[2]) and m[5] else m[0], text
    )
    return _BEARER.sub(rf"\1\2{MASK}", text)


def redact(value: Any, name: Any = None) -> Any:
    """A copy of a config tree (dicts, lists, strings: `OmegaConf.to_container`'s output) with every secret masked:
    the whole value of a key with a secret's name, the secret parts of every string."""
    if name is not None and is_secret_name(name) and value not in (None, "", MASK):
        return MASK
    if isinstance(value, Mapping):
        return {k: redact(v, k) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact(v) for v in value)
    return redact_text(value) if isinstance(value, str) else value


def redact_yaml_file(path: str | Path) -> bool:
    """Rewrite a YAML file (one of Hydra's) with its secrets masked; untouched when it holds none. True if rewritten."""
    import yaml

    path = Path(path)
    try:
        data = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # libyaml: ~10x
    except (OSError, yaml.YAMLError):
        return False
    clean = redact(data)
    if clean == data:
        return False

    def write(tmp: Path) -> None:
        with tmp.open("w") as fh:
            yaml.safe_dump(clean, fh, sort_keys=False, allow_unicode=True, default_flow_style=False)

    owners.write_whole(path, write, "an interrupted redaction")  # parallel jobs may rewrite multirun.yaml at once
    return True


def _redacting_factory(factory: Callable[..., logging.LogRecord]) -> Callable[..., logging.LogRecord]:
    def make(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = factory(*args, **kwargs)
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed log call: leave it to logging's own error handling
            return record
        clean = redact_text(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = redact_text(logging.Formatter().formatException(record.exc_info))
        return record

    make.redacts = True  # type: ignore[attr-defined]  # the mark install_log_redaction looks for
    return make


def install_log_redaction() -> None:
    """Mask secrets in every log record this process creates from now on, whichever logger and handler (Hydra
    reconfigures handlers at job start; the record factory stays). Idempotent."""
    factory = logging.getLogRecordFactory()
    if not getattr(factory, "redacts", False):
        logging.setLogRecordFactory(_redacting_factory(factory))


def redact_hydra_files(config: DictConfig) -> list[Path]:
    """Mask secrets in the files Hydra wrote for this job (`<output_dir>/.hydra/*.yaml`) and, in a multirun, in
    the sweep's `multirun.yaml`. Returns the files it rewrote."""
    hydra = config.hydra
    files: list[Path] = []
    if hydra.get("output_subdir") is not None:
        folder = Path(hydra.runtime.output_dir) / str(hydra.output_subdir)
        files += [folder / name for name in ("config.yaml", "hydra.yaml", "overrides.yaml")]
    if str(hydra.get("mode")) in ("RunMode.MULTIRUN", "MULTIRUN"):
        files.append(Path(hydra.sweep.dir) / "multirun.yaml")
    return [path for path in files if path.is_file() and redact_yaml_file(path)]


class RedactCallback(Callback):
    """Hydra callback (conf/config.yaml): log redaction from the start of a run or sweep, and Hydra's own files
    rewritten without secrets as each job starts (Hydra writes them just before `on_job_start`)."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        install_log_redaction()

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        install_log_redaction()

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        install_log_redaction()  # a launcher's worker process (joblib, submitit) starts here
        redact_hydra_files(config)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        multirun = Path(config.hydra.sweep.dir) / "multirun.yaml"
        if multirun.is_file():
            redact_yaml_file(multirun)
