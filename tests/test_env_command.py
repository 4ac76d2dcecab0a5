"""`attnprof env` (issue 32): every version and the device, each probed on its own, so that one
probe that fails (a package whose import raises, a cuDNN that will not load) leaves the others."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from attnprof.harness.versions import PACKAGES

ATTNPROF = [sys.executable, "-m", "attnprof"]


def _env(*args: str, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(pythonpath), env.get("PYTHONPATH")) if p)
    return subprocess.run([*ATTNPROF, "env", *args], capture_output=True, text=True, timeout=300, env=env)


def _probes(p: subprocess.CompletedProcess[str]) -> dict[str, dict[str, str | None]]:
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["schema"] == "attnprof.env/1"
    return {row["name"]: row for row in doc["probes"]}


def test_env_names_every_version_and_the_device_here() -> None:
    torch = pytest.importorskip("torch")
    from attnprof.variants.sdpa import pytorch_choice
    from attnprof.workload import Workload

    probes = _probes(_env("--json", "--device", "cpu"))
    assert probes["torch"]["value"] == str(torch.__version__)
    assert probes["python"]["value"] == platform.python_version()
    assert set(PACKAGES) <= set(probes)
    for name in PACKAGES:  # a value, or unknown with the reason: never both, never neither
        row = probes[name]
        assert (row["value"] is None) != (row["why"] is None), row
    assert probes["device"]["value"] == "cpu"
    w = Workload(batch=1, heads=8, seq=512, head_dim=64, dtype="fp32", device="cpu")
    assert str(probes["sdpa choice"]["value"]).startswith(pytorch_choice(w) + " (for 1,8,512,64 fp32")
    if not torch.cuda.is_available():
        assert probes["gpus"]["value"] == "0" and "gpu" not in probes  # no GPU line without a GPU
    text = _env("--device", "cpu")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert len(lines) == len(probes)  # one line a probe
    assert lines[0].split() == ["attnprof", str(probes["attnprof"]["value"])]


def test_a_probe_that_fails_says_why_and_the_others_still_answer(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    # a real package whose import raises (a broken build), ahead of anything installed
    broken = tmp_path / "flash_attn"
    broken.mkdir()
    (broken / "__init__.py").write_text(
        'raise RuntimeError("undefined symbol: flash_fwd (a broken build)")\n'
    )
    probes = _probes(_env("--json", "--device", "cpu", pythonpath=tmp_path))
    row = probes["flash_attn"]
    assert row["value"] is None and row["why"] == "RuntimeError: undefined symbol: flash_fwd (a broken build)"
    after = list(probes)[list(probes).index("flash_attn") + 1 :]
    assert {"numpy", "msgspec", "torch.cuda", "cudnn", "device", "sdpa choice"} <= set(after)
    assert probes["numpy"]["value"] and probes["device"]["value"] == "cpu" and probes["sdpa choice"]["value"]
    text = _env("--device", "cpu", pythonpath=tmp_path).stdout
    assert "unknown (RuntimeError: undefined symbol: flash_fwd (a broken build))" in text


@pytest.mark.gpu
def test_env_on_a_gpu_names_cuda_cudnn_the_gpu_and_pytorchs_choice() -> None:
    import torch

    probes = _probes(_env("--json", "--device", "cuda"))
    assert probes["torch.cuda"]["value"] == torch.version.cuda
    assert probes["device"]["value"] in ("cuda", "cuda:0")
    gpu = str(probes["gpu"]["value"])
    assert gpu.startswith(torch.cuda.get_device_name(0)) and " SMs" in gpu
    assert str(probes["sdpa choice"]["value"]).split()[0] in ("flash", "efficient", "cudnn", "math")
    assert probes["cudnn"]["value"] is not None or probes["cudnn"]["why"]
