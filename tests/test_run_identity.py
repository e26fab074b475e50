"""What makes two runs the same job's work (src/tracking/identity.py): the config hash leaves out only the keys that
say where results go, identities and content tags keep values that hold `=`, and the rerun's line names every part
that changed."""

from __future__ import annotations

import hashlib
from types import SimpleNamespace as N

import pytest

from src.tracking.identity import (
    JOB_INDEPENDENT_KEYS,
    config_hash,
    content_parts,
    identity_change,
    identity_fields,
    short_hash,
)

CONFIG = {"model": {"name": "m"}, "benchmark": "synthetic", "variants": "cora", "seed": 0}


@pytest.mark.promise("docs/tracking.md", "a finished run is reused only for the same config, wherever its results go")
def test_the_config_hash_changes_with_the_job_and_never_with_where_its_results_go():
    base = config_hash(CONFIG)
    assert len(base) == 16 and int(base, 16) >= 0
    for key in JOB_INDEPENDENT_KEYS:
        assert config_hash({**CONFIG, key: {"path": "/elsewhere"}}) == base, key
    for key, other in (("model", {"name": "m2"}), ("variants", "original"), ("seed", 1), ("limit", 20)):
        assert config_hash({**CONFIG, key: other}) != base, key


def test_a_short_hash_is_the_first_16_hex_digits_of_sha256():
    text = "hf:/m|gguf=m.gguf@sha256:aa|dtype=float32"
    assert short_hash(text) == hashlib.sha256(text.encode()).hexdigest()[:16]


def test_identity_fields_and_content_parts_keep_a_value_that_holds_an_equals_sign():
    served = '{"root":"/w","meta":"n_params=135"}'
    assert identity_fields(f"openai:http://h/v1|model=m|served={served}|revision=None")["served"] == served
    assert content_parts("weights=ab,chat template=x=y") == {"weights": "ab", "chat template": "x=y"}


def _run(**tags: str) -> N:
    return N(info=N(run_id="7d00ff6a"), data=N(tags={"model_identity": "m1", "data_identity": "d1", **tags}))


def test_the_rerun_line_names_every_changed_part_and_the_model_whole_when_no_part_differs():
    run = _run(model_content="weights=aa,chat template=bb,generation config=cc")
    now = {"model_identity": "m2", "data_identity": "d2"}
    assert identity_change(run, now, "weights=aa,chat template=b2,generation config=c2") == (
        "model chat template and generation config and benchmark data changed since run 7d00ff6a: running again"
    )
    # the same content parts, another identity (a setting of the same files): the model, not an empty part list
    same = "weights=aa,chat template=bb,generation config=cc"
    assert identity_change(run, {"model_identity": "m2", "data_identity": "d1"}, same) == (
        "model weights changed since run 7d00ff6a: running again"
    )
