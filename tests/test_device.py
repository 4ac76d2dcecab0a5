"""attnprof.device: the one --device resolution (commands and a sweep's grid) and the one table of
GPU spec peaks (runs and traces), importable without torch."""

from __future__ import annotations

import subprocess
import sys

import pytest

from _records import environment
from attnprof.device import PEAKS, auto_device, peak_for, resolve_device, spec_device
from attnprof.errors import UserError
from attnprof.sweep.grid import GridSpec, SweepConfig, expand


def test_spec_peaks_by_name_first_match_wins() -> None:
    tflops, tbps, source = peak_for("NVIDIA H100 80GB HBM3", "bf16")
    assert (tflops, tbps) == (989.0, 3.35) and source is not None and source.startswith("H100: NVIDIA H100")
    assert peak_for("NVIDIA H100 PCIe", "fp16")[0] == 756.0  # the PCIe part, not the SXM figure
    assert peak_for("NVIDIA GH200 480GB", "bf16")[1] == 4.0  # GH200 is matched before H200
    assert peak_for("NVIDIA B200", "fp32")[:2] == (75.0, 8.0)
    assert peak_for("Tesla V100-SXM2-16GB", "bf16")[:2] == (None, 0.9)  # no bf16 on a V100: none claimed
    # no spec peak is claimed for a device the table does not name, a CPU, or no name at all
    assert peak_for("Intel(R) Xeon(R) Platinum 8480+", "fp32") == (None, None, None)
    assert peak_for(None, "bf16") == (None, None, None)
    assert all(p.key and p.source and p.tbps > 0 for p in PEAKS)
    # the key a run's provenance names (harness/env.py run_peak) is the one peak_for matched
    assert spec_device("NVIDIA GH200 480GB") == "GH200" and spec_device("NVIDIA H100 PCIe") == "H100 PCIe"
    assert spec_device("Intel(R) Xeon(R)") is None and spec_device(None) is None


def test_spec_device_takes_the_most_specific_key() -> None:
    # issue 21 item 9: an H200 NVL is not an H200 (835 dense bf16 TFLOP/s, not 989)
    assert spec_device("NVIDIA H200 NVL") == "H200 NVL" and peak_for("NVIDIA H200 NVL", "bf16")[0] == 835.0
    assert spec_device("NVIDIA H200") == "H200" and spec_device("NVIDIA H100 NVL") == "H100 NVL"
    assert spec_device("NVIDIA A100-SXM4-80GB") == "A100 SXM4 80GB"
    assert spec_device("NVIDIA A100-PCIE-40GB") == "A100 40GB"
    assert spec_device("NVIDIA A100 80GB PCIe") == "A100 80GB PCIe"
    # words, not substrings: an A10G is no A10, an L40S no L40 and no L4
    assert spec_device("NVIDIA A10G") is None and spec_device("NVIDIA A10") == "A10"
    assert spec_device("NVIDIA L40S") == "L40S" and spec_device("NVIDIA L4") == "L4"
    assert spec_device("AMD Instinct MI300X VF") == "MI300X"
    assert spec_device("NVIDIA GeForce RTX 4090") == "RTX 4090"
    # ROCm's one name for two parts names neither: no peak is guessed
    assert spec_device("AMD Instinct MI250X/MI250") is None
    assert peak_for("AMD Instinct MI250X/MI250", "bf16") == (None, None, None)


def test_resolve_device_spelling() -> None:
    assert resolve_device(" CPU ") == "cpu"
    assert resolve_device("cuda:1", probe=False) == "cuda:1"  # a grid's spelling check only
    for bad in ("tpu", "cuda:x", "cuda:", "gpu"):
        with pytest.raises(UserError, match=r"unknown --device .*: use auto, cpu, cuda or cuda:N"):
            resolve_device(bad)
    with pytest.raises(UserError, match=r"^unknown device 'tpu'"):
        resolve_device("tpu", flag="device", probe=False)


def test_auto_and_cuda_agree_with_torch() -> None:
    import torch

    assert resolve_device("auto") == auto_device() == ("cuda" if torch.cuda.is_available() else "cpu")
    if torch.cuda.is_available():
        n = torch.cuda.device_count()
        assert resolve_device("cuda:0") == "cuda:0"
        with pytest.raises(UserError, match=f"this machine has {n} GPU"):
            resolve_device(f"cuda:{n}")
    else:
        with pytest.raises(UserError, match=r"no CUDA GPU is visible to torch .*; use --device cpu"):
            resolve_device("cuda")


def test_sweep_grid_uses_the_same_resolution() -> None:
    cfg = SweepConfig(grid=GridSpec(device="tpu", seq=[16], variants=["naive"]))
    with pytest.raises(UserError, match=r"^unknown device 'tpu': use auto, cpu, cuda or cuda:N"):
        expand(cfg)
    jobs, _ = expand(SweepConfig(grid=GridSpec(device=" CPU", seq=[16], variants=["naive"])))
    assert jobs and {j.workload.device for j in jobs} == {"cpu"}


def test_device_module_does_not_import_torch() -> None:
    code = (
        "import sys, attnprof.device as d; d.peak_for('NVIDIA H100', 'bf16'); "
        "d.resolve_device('cpu'); print('torch' in sys.modules)"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "False"


def test_a_cuda_half_run_takes_the_table_peak_with_its_key() -> None:
    """The run's spec branch (harness/env.py run_peak) reads the same table and names the same key;
    no GPU is needed to take it, as nothing is measured."""
    from attnprof.harness.env import peak_text, run_peak

    env = environment(device="cuda", device_name="NVIDIA H100 PCIe")
    tflops, prov = run_peak(env, "bf16")
    assert tflops == peak_for(env.device_name, "bf16")[0] == 756.0
    assert prov.kind == "spec" and prov.spec_device == "H100 PCIe"
    assert peak_text(prov).startswith("H100 PCIe: dense spec sheet figures") and peak_text(prov).endswith(
        "(bf16)"
    )
