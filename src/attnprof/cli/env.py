"""`attnprof env`: the versions and the device, each probed on its own (attnprof.harness.versions)."""

from __future__ import annotations

import sys

from attnprof.cli import app
from attnprof.cli.options import Device, JsonOut

__all__: list[str] = []


@app.command("env")
def env_command(device: Device = "auto", json_out: JsonOut = False) -> None:
    """The library versions, CUDA, cuDNN, the device and PyTorch's own SDPA choice: each asked on its
    own, "unknown (why)" where one fails, for a bug report or a GPU check."""
    from attnprof.harness.versions import probes

    found = probes(device)
    if json_out:
        import msgspec

        doc = {"schema": "attnprof.env/1", "probes": found}  # a probe: name, value (null: unknown), why
        sys.stdout.write(msgspec.json.format(msgspec.json.encode(doc), indent=2).decode() + "\n")
        return
    width = max(len(p.name) for p in found)
    sys.stdout.write("".join(f"{p.name:<{width}}  {p.text}\n" for p in found))
