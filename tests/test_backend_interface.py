"""The backend interface says what it holds: callers ask a backend only what `Backend` declares, and each backend's
settings are one typed value built from its config node."""

from __future__ import annotations

import re
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

from src.backends import load_backend
from src.backends.base import Backend
from src.backends.openai_backend import OpenAIBackend, OpenAISettings
from src.backends.oracle import OracleBackend
from src.backends.simulated import SimulatedBackend, SimulatedSettings
from src.common.errors import UserError

SRC = Path(__file__).resolve().parents[1] / "src"
# a probe of an object's methods where the object is a backend: `hasattr(backend, ...)`, `getattr(kept, ...)`
PROBE = re.compile(r"\b(?:has|get)attr\(\s*(?:self\.)?(?:backend|kept|fresh|model_backend)\b")


def test_no_caller_probes_a_backend_for_its_methods():
    probes = [
        f"{path.relative_to(SRC.parent)}:{number}: {line.strip()}"
        for path in sorted(SRC.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if PROBE.search(line)
    ]
    assert not probes, "ask what `Backend` declares (src/backends/base.py), with a default there:\n" + "\n".join(probes)


def test_the_interface_gives_a_backend_without_a_model_its_defaults():
    backend = load_backend({"backend": "simulated", "name": "sim", "success_rate": 0.5}, chat=False)
    assert isinstance(backend, Backend) and isinstance(backend, OracleBackend)
    backend.load()
    backend.new_job()
    assert backend.tokenizer is None and backend.content is None and backend.model_input("Q?") is None
    assert backend.run_params() == {} and backend.prompts_per_chunk(7) == 7
    assert backend.identity == "simulated(success_rate=0.5,invalid_rate=0.0)"
    with pytest.raises(TypeError, match="abstract"):
        Backend()  # type: ignore[abstract]


def test_settings_are_one_frozen_value_built_from_the_config_node():
    settings = OpenAISettings.from_config(
        {"backend": "openai", "model": "m", "base_url": "http://h/v1/", "max_concurrency": "4"}, chat=False
    )
    assert settings.base_url == "http://h/v1" and settings.max_concurrency == 4 and settings.chat is False
    assert OpenAISettings.from_config({"model": "m", "chat": False}, chat=True).chat is False, "the node's own wins"
    with pytest.raises(FrozenInstanceError):
        settings.model = "other"  # type: ignore[misc]
    assert OpenAIBackend(settings).settings is settings
    assert SimulatedBackend(SimulatedSettings(success_rate=0.25)).settings.success_rate == 0.25


@pytest.mark.parametrize(
    ("node", "says"),
    [
        ({"backend": "openai", "model": "m", "modle": "x"}, "model config for backend openai: "),
        ({"backend": "openai"}, "set model.model to the server's model name"),
        ({"backend": "openai", "model": "m", "max_concurrency": 0}, "model.max_concurrency=0 must be at least 1"),
        ({"backend": "simulated", "sucess_rate": 0.5}, "model config for backend simulated: "),
        ({"backend": "simulated", "success_rate": 2}, "success_rate must be in [0, 1]; check the keys under model"),
    ],
)
def test_a_bad_setting_is_one_line_naming_it(node, says):
    with pytest.raises(UserError) as refused:
        load_backend(node, chat=False)
    assert says in str(refused.value) and "\n" not in str(refused.value)


@pytest.mark.parametrize("backend", ["hf", "vllm"])
def test_a_key_that_is_not_a_setting_is_refused_in_one_line_listing_the_keys(backend):
    cfg = {"name": "m", "backend": backend, "path": "org/model", "temperatur": 0.7}
    with pytest.raises(UserError) as err:
        load_backend(cfg, chat=False)
    message = str(err.value)
    assert message.startswith(f"model.temperatur is not a setting of backend {backend}; the keys are ")
    assert "\n" not in message and "path" in message.split("the keys are ")[1].split(", ")
