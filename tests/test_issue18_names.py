"""Kernel names read against the device that ran them (issue 18): an fp8 / fp4 GEMM's name says
what its data are; only a device with such matrix units multiplies them on tensor cores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from test_analysis_truth import A100, MI300, kernel, launch, run

B200 = {"id": 0, "name": "NVIDIA B200", "computeMajor": 10, "computeMinor": 0, "numSms": 148}
H100 = {"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0, "numSms": 132}
MXFP4 = "bmm_Bfloat16_E2m1E2m1_Fp32_t128x8x512u2_s3_et128x8_m128x8x64_cga1x1x1_16dp256b_TN_schedS"
FP8 = "bmm_E4m3_E4m3E4m3_Fp32_t128x128x128u2_s6_et64x32_m64x32x32_cga1x1x1_16dp256b_TN_transOut"


def _gemm(name: str) -> list[dict[str, Any]]:
    return [launch(0, 1), kernel(name, 10, 100, 1)]


@pytest.mark.parametrize(
    ("name", "props", "tensor_cores"),
    [
        (MXFP4, B200, True),  # Blackwell has fp4 tensor cores
        (MXFP4, MI300, None),  # CDNA3 has none: the weights are widened, the math is not fp4
        (MXFP4, H100, None),  # Hopper has fp8, not fp4
        (FP8, H100, True),
        (FP8, MI300, True),  # CDNA3 takes fp8
        (FP8, A100, None),  # Ampere has no fp8 tensor cores
        (FP8, None, None),  # no device in the trace: unknown, not claimed
    ],
    ids=lambda v: v["name"] if isinstance(v, dict) else str(v)[:12],
)
def test_low_precision_gemm_claims_tensor_cores_only_where_the_device_has_them(
    tmp_path: Path, name: str, props: dict[str, Any] | None, tensor_cores: bool | None
) -> None:
    a = run(tmp_path, _gemm(name), props=props)
    (k,) = a.kernels
    assert k.category == "gemm"
    assert k.precision == ("fp4" if name == MXFP4 else "fp8")  # what the data are, as the name says
    assert k.tensor_cores is tensor_cores
    if tensor_cores is None:
        assert "tensor cores" not in k.family
