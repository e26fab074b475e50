"""`model.dtype`: `auto` is bfloat16 where the device the model runs on computes it natively, else float32; the
backend's identity names the dtype it resolved to; a value that is no floating-point dtype is one config line."""

from __future__ import annotations

import pytest
import torch

from src.backends.hf import HFBackend, HFSettings
from src.backends.hf.loading import torch_dtype
from src.common.errors import UserError


@pytest.fixture
def cpu_bf16(monkeypatch):
    """Set what torch's CPU probes report: `cpu_bf16(avx512_bf16, amx)`; CUDA absent."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)

    def set_probes(avx512_bf16: bool, amx: bool = False) -> None:
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16, raising=False)
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx, raising=False)

    return set_probes


@pytest.mark.parametrize(
    "avx512_bf16, amx, expected",
    [
        (False, False, torch.float32),  # e.g. AMD Zen 3, Intel before Cooper Lake: bf16 would be emulated
        (True, False, torch.bfloat16),  # AMD Zen 4, Intel Cooper Lake
        (False, True, torch.bfloat16),  # Intel Sapphire Rapids (AMX)
    ],
)
@pytest.mark.promise(
    "docs/reproducibility.md", "dtype auto picks bfloat16 on a CPU with AVX-512 BF16 or AMX, float32 elsewhere"
)
def test_auto_on_the_cpu_follows_its_bf16_instructions(cpu_bf16, avx512_bf16, amx, expected):
    cpu_bf16(avx512_bf16, amx)
    assert torch_dtype("auto") is expected
    assert torch_dtype("auto", device_map="auto") is expected  # no CUDA: a device map still runs on the CPU


@pytest.mark.promise("docs/reproducibility.md", "dtype auto picks bfloat16 on a GPU of compute capability 8.0 or more")
def test_auto_on_a_gpu_follows_its_native_bf16_not_the_cpu(monkeypatch, cpu_bf16):
    cpu_bf16(avx512_bf16=True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    asked = []

    def is_bf16_supported(including_emulation: bool = True) -> bool:
        asked.append(including_emulation)
        return native

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", is_bf16_supported)
    # B007, `native` unused in the body: is_bf16_supported reads it (e.g. A100 / T4, V100)
    for native, expected in ((True, torch.bfloat16), (False, torch.float32)):  # noqa: B007
        assert torch_dtype("auto", device_map="auto") is expected
        assert torch_dtype("auto", device_map={"": 0}) is expected
    assert asked and not any(asked)  # emulated bf16 does not count
    assert torch_dtype("auto", device_map="cpu") is torch.bfloat16  # a map onto the CPU asks the CPU
    assert torch_dtype("auto", device_map=None) is torch.bfloat16


@pytest.mark.promise("docs/reproducibility.md", "a named dtype is kept whatever the hardware")
def test_named_dtypes_are_kept_whatever_the_hardware(cpu_bf16):
    cpu_bf16(avx512_bf16=False)
    assert torch_dtype("bfloat16") is torch.bfloat16
    assert torch_dtype("float16") is torch.float16
    assert torch_dtype("float32") is torch.float32


@pytest.mark.promise(
    "docs/reproducibility.md", "the backend identity (the backend tag) names the resolved dtype: |dtype=bfloat16|"
)
def test_identity_names_the_resolved_dtype(cpu_bf16, tmp_path):
    """The response cache keys answers by identity: an auto config on a bf16 CPU and on one without must not share."""
    identities = {}
    for has_bf16 in (True, False):
        cpu_bf16(avx512_bf16=has_bf16)
        backend = HFBackend(HFSettings(name="m", path=str(tmp_path), dtype="auto"))
        identities[has_bf16] = backend.identity
        assert backend.dtype_name == ("bfloat16" if has_bf16 else "float32")
    assert "|dtype=bfloat16|" in identities[True] and "|dtype=float32|" in identities[False]
    assert HFBackend(HFSettings(name="m", path=str(tmp_path), dtype="float32")).identity == identities[False]


@pytest.mark.parametrize("value", ["int8", "[bfloat16]"])
def test_ill_typed_dtype_stops_the_job_with_one_config_line(run_job_in, tmp_path, value):
    """Through a whole job (`python -m src.run` turns the UserError into its one line and exit 2)."""
    with pytest.raises(UserError) as err:
        run_job_in("model=hf", f"model.path={tmp_path}", f"model.dtype={value}", "limit=1")
    message = str(err.value)
    assert message.startswith("config key model.dtype: ") and "\n" not in message, message
    assert "float32, bfloat16, float16 or auto" in message
    assert err.value.exit_code == 2


@pytest.mark.parametrize("value", ["float33", "cuda", "16", 16, None, True, ["bfloat16"]])
def test_every_non_float_dtype_is_refused_naming_model_dtype(tmp_path, value):
    with pytest.raises(UserError, match=r"^config key model\.dtype: .* is not a floating-point torch dtype"):
        HFBackend(HFSettings(name="m", path=str(tmp_path), dtype=value))


@pytest.mark.promise("docs/reproducibility.md", "the embedded model is pinned to float32")
def test_embedded_model_stays_float32_and_generic_hf_is_auto():
    """The default model's records are stored (tests/golden_records.py) and compared with lm-eval in float32: it
    pins float32 on every CPU; `model=hf` takes what the hardware does best."""
    from omegaconf import OmegaConf

    from src.config.compose import compose_job

    assert OmegaConf.select(compose_job([]), "model.dtype") == "float32"
    assert OmegaConf.select(compose_job(["model=hf", "model.path=x"]), "model.dtype") == "auto"
