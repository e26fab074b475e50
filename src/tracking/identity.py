"""What makes two runs the same job's work: the config hash (less the keys that only say where results go), the
fields of a backend identity, the model's content parts, and the line a rerun prints when the model or data
changed since the finished run of its config."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from src.common.digests import json_sha256, text_sha256

if TYPE_CHECKING:
    from src.tracking import store

# where things are, not what the job is; `stats` (the intervals' resamples and level) changes no question asked,
# no answer and no point metric, so runs made before it existed keep their hash
JOB_INDEPENDENT_KEYS = ("tracking", "cache", "resume", "data_dir", "stats")


def config_hash(cfg: Mapping[str, Any]) -> str:
    """Identity of a job's work: the resolved config without the keys that only say where results go."""
    kept = {k: v for k, v in cfg.items() if k not in JOB_INDEPENDENT_KEYS}
    return json_sha256(kept, length=16)


def short_hash(text: str) -> str:
    """16 hex digits of sha256: a long identity (a backend's) as a tag value that compares exactly."""
    return text_sha256(text, length=16)


# The tag of a job's run that holds the keys its command line or sweep set (src/job/runner.py `override_tags`), and
# its value for a job that set none
OVERRIDES_TAG = "overrides"
NO_OVERRIDES = "(none)"
# The fields of a backend identity (the run's `backend` tag) that are settings of the same weights, not other
# weights: what a model computes in (dtype, quantization) and whether prompts are wrapped in its chat template
SETTING_FIELDS = ("dtype", "quantization", "chat")


def identity_fields(identity: str) -> dict[str, str]:
    """A backend identity ("hf:<weights>|gguf=<file>@sha256:<hash>|revision=None|dtype=float32|chat=True") as
    fields; the first one names the model (and backend).

    >>> identity_fields("hf:/m|gguf=m.gguf@sha256:aa|revision=None|dtype=float32|chat=True")["chat"]
    'True'
    """
    first, *rest = identity.split("|")
    return {"backend": first, **{key: value for key, _, value in (part.partition("=") for part in rest)}}


def weights_fields(identity: str) -> dict[str, str]:
    """The fields of a backend identity that name the weights (and the tokenizer files that come with them: a
    GGUF holds its tokenizer, a folder's fingerprint covers its tokenizer files, a hub commit both): every field
    but SETTING_FIELDS.

    >>> weights_fields("hf:/m|gguf=m.gguf@sha256:aa|revision=None|dtype=float32|chat=True")
    {'backend': 'hf:/m', 'gguf': 'm.gguf@sha256:aa', 'revision': 'None'}
    """
    return {k: v for k, v in identity_fields(identity).items() if k not in SETTING_FIELDS}


# the content identities a job's run is tagged with (src/job/runner.py), as the rerun's line names them
IDENTITY_TAGS = {"model_identity": "model weights", "data_identity": "benchmark data"}
# the parts of the model's content (src/backends/weights.py), as `weights=<16 hex>,tokenizer=<16 hex>,...`: the
# rerun's line names the part that changed ("model generation config changed since run ...")
CONTENT_TAG = "model_content"


def content_tag(parts: Mapping[str, str]) -> str:
    """The `model_content` tag of a model's content parts.

    >>> content_tag({"weights": "ab", "chat template": "cd"})
    'weights=ab,chat template=cd'
    """
    return ",".join(f"{part}={value}" for part, value in parts.items())


def content_parts(tag: str | None) -> dict[str, str]:
    """The parts of a `model_content` tag ({} without one).

    >>> content_parts("weights=ab,chat template=cd")
    {'weights': 'ab', 'chat template': 'cd'}
    """
    return dict(item.split("=", 1) for item in tag.split(",") if "=" in item) if tag else {}


def identity_change(run: store.Run, identities: Mapping[str, str], content: str | None = None) -> str | None:
    """None when the finished `run` of a job's config was made with the same model and data `identities`; else the
    line the job prints before it runs again (the older run stays as it was). With both runs' `content` tags, the
    line names the parts of the model that changed (weights, tokenizer, chat template, generation config).

    >>> from types import SimpleNamespace as N
    >>> run = N(info=N(run_id="7d00ff6a"), data=N(tags={"model_identity": "m1", "data_identity": "d1"}))
    >>> identity_change(run, {"model_identity": "m1", "data_identity": "d1"}) is None
    True
    >>> identity_change(run, {"model_identity": "m2", "data_identity": "d1"})
    'model weights changed since run 7d00ff6a: running again'
    >>> run.data.tags[CONTENT_TAG] = "weights=aa,generation config=bb"
    >>> identity_change(run, {"model_identity": "m2", "data_identity": "d1"}, "weights=aa,generation config=cc")
    'model generation config changed since run 7d00ff6a: running again'
    """
    tags = run.data.tags
    if not any(tag in tags for tag in IDENTITY_TAGS):
        return (
            f"run {run.info.run_id} of this config logged no model or data identity (made before they were "
            f"logged): running again"
        )
    changed = []
    for tag, what in IDENTITY_TAGS.items():
        if tags.get(tag) == identities[tag]:
            continue
        before, now = content_parts(tags.get(CONTENT_TAG)), content_parts(content)
        parts = [p for p in dict.fromkeys([*before, *now]) if before.get(p) != now.get(p)]
        changed.append(f"model {' and '.join(parts)}" if tag == "model_identity" and before and parts else what)
    return f"{' and '.join(changed)} changed since run {run.info.run_id}: running again" if changed else None
