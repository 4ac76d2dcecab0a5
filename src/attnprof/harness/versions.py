"""What this machine runs: the library versions and the device every later verdict depends on,
each asked on its own (`attnprof env`).

A bug report, or the first lines of a GPU check, want every version at once; one probe that
fails (a cuDNN that will not load, a package whose import raises) must not take the others with
it. So each is asked separately and answers a value, or "unknown" with the reason: "not
installed", or the error's type and first line. Nothing is guessed.
"""

from __future__ import annotations

import importlib
import platform
from collections.abc import Callable
from dataclasses import dataclass

from attnprof.errors import first_line

__all__ = ["PACKAGES", "Probe", "probes"]

# the packages attnprof's paths depend on, in the order a reader looks for them
PACKAGES = (
    "torch", "triton", "transformers", "kernels", "flash_attn", "numpy", "msgspec", "orjson", "typer",
    "rich", "babel", "jinja2", "matplotlib", "ray",
)  # fmt: skip


@dataclass(frozen=True)
class Probe:
    name: str
    value: str | None  # None: unknown
    why: str | None = None  # why it is unknown

    @property
    def text(self) -> str:
        return self.value if self.value is not None else f"unknown ({self.why})"


def _ask(name: str, fn: Callable[[], object]) -> Probe:
    try:
        value = fn()
    except ModuleNotFoundError as exc:
        return Probe(name, None, "not installed" if exc.name == name.split(".")[0] else _said(exc))
    except Exception as exc:  # any failure of one probe is its answer, not the command's end
        return Probe(name, None, _said(exc))
    return Probe(name, str(value)) if value is not None else Probe(name, None, "none reported")


def _said(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {first_line(exc)}" if str(exc) else type(exc).__name__


def _version(module: str) -> str:
    m = importlib.import_module(module)
    v = getattr(m, "__version__", None)
    if v is None:
        from importlib.metadata import version

        v = version(module)
    return str(v)


def probes(device: str = "auto") -> list[Probe]:
    """Every probe, in order: attnprof, Python, the platform and CPU, each package, then what
    torch says of CUDA and cuDNN, the device (resolved from `device`) and PyTorch's own SDPA
    backend for the default workload there."""
    from attnprof._version import __version__
    from attnprof.harness.env import cpu_model

    out = [
        Probe("attnprof", __version__),
        _ask("python", platform.python_version),
        _ask("platform", platform.platform),
        _ask("cpu", cpu_model),
    ]
    packages = [_ask(p, lambda p=p: _version(p)) for p in PACKAGES]  # type: ignore[misc]
    out += packages
    if next(p for p in packages if p.name == "torch").value is None:
        return out  # no torch: nothing below can be asked
    import torch

    out.append(_ask("torch.cuda", lambda: torch.version.cuda or "none (a CPU build)"))
    out.append(_ask("torch.hip", lambda: getattr(torch.version, "hip", None) or "none"))
    out.append(_ask("cudnn", _cudnn))
    out.append(_ask("gpus", torch.cuda.device_count))
    dev = _ask("device", lambda: _resolved(device))
    out.append(dev)
    if dev.value is not None and dev.value.startswith("cuda"):
        out.append(_ask("gpu", lambda: _gpu(str(dev.value))))
    if dev.value is not None:
        out.append(_ask("sdpa choice", lambda: _sdpa_choice(str(dev.value))))
    return out


def _cudnn() -> str:
    import torch

    if not torch.backends.cudnn.is_available():
        return "not available"
    return str(torch.backends.cudnn.version())


def _resolved(device: str) -> str:
    from attnprof.device import resolve_device

    return resolve_device(device)


def _gpu(device: str) -> str:
    import torch

    p = torch.cuda.get_device_properties(torch.device(device))
    l2 = getattr(p, "L2_cache_size", 0) >> 20
    return f"{p.name}, sm{p.major}{p.minor}, {p.total_memory / 2**30:.1f} GiB, L2 {l2} MiB, {p.multi_processor_count} SMs"


def _sdpa_choice(device: str) -> str:
    """PyTorch's own backend for the default workload of this device (the blog's shape on a GPU)."""
    from attnprof.variants.sdpa import pytorch_choice
    from attnprof.workload import Workload, default_dtype, default_shape

    b, h, s, d = default_shape(device)
    w = Workload(batch=b, heads=h, seq=s, head_dim=d, dtype=default_dtype(device), device=device)
    return f"{pytorch_choice(w)} (for {w.batch},{w.heads},{w.seq},{w.head_dim} {w.dtype} causal)"
