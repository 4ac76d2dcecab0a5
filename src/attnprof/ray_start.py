"""Ray, connected or started: the one place attnprof calls ray.init (analyze's folder executor,
the sweep's Ray executor).

Without an address a Ray instance is started on this machine, on the loopback address only:
nothing it starts listens beyond the machine. `_node_ip_address="127.0.0.1"` alone does not do
that: Ray replaces a loopback node address by the machine's outward one (resolve_ip_for_localhost,
Ray 2.60), and its GCS, raylet and workers then listened on every interface (tested). What keeps
a local instance on 127.0.0.1 is the setting Ray uses for macOS and Windows, where it never
forms a cluster: RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, read by the driver when ray is imported and
by each process Ray starts (they inherit the environment). It is set in this process when a
local Ray is started or one on 127.0.0.1 joined, and stays set: such a process does not join a
cluster elsewhere later. With another address (`auto`, `ray://head:10001`) the cluster there is
joined as it is. An address with no cluster behind it is one line naming the address (UserError), not Ray's
traceback.
"""

from __future__ import annotations

import os
from types import ModuleType
from typing import Any

from attnprof.errors import UserError
from attnprof.extras import load

__all__ = ["LOOPBACK", "is_loopback", "ray_started"]

LOOPBACK = "127.0.0.1"
# Ray's own switch (ray._private.ray_constants): "0" makes every node address the loopback one
_LOCAL_ONLY = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def is_loopback(address: str) -> bool:
    """Whether a Ray address names this machine's loopback interface."""
    host = address.split("://")[-1].rsplit(":", 1)[0]
    return host in (LOOPBACK, "localhost")


def ray_started(address: str | None, what: str = "--executor ray") -> tuple[ModuleType, bool]:
    """(ray, whether this call started or joined it): a caller that did shuts it down when done;
    one already initialised in this process (a test's, a notebook's) is used as it is."""
    ray = load("ray", what)
    if ray.is_initialized():
        return ray, False
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
    if address:
        kwargs["address"] = address
    if not address or is_loopback(address):
        # a Ray on this machine's loopback address: the driver is on it too
        _local_only(ray)
        kwargs["_node_ip_address"] = LOOPBACK
    try:
        ray.init(**kwargs)
    except ConnectionError as exc:
        raise UserError(f"--ray-address {address}: cannot connect to a Ray cluster there ({exc})") from None
    return ray, True


def _local_only(ray: ModuleType) -> None:
    """Keep a Ray started here on the loopback address: the driver's copy of Ray's switch (read
    when ray was imported) is set, and the processes Ray starts read it from the environment."""
    os.environ[_LOCAL_ONLY] = "0"
    constants = getattr(getattr(ray, "_private", None), "ray_constants", None)
    if constants is not None and hasattr(constants, "ENABLE_RAY_CLUSTER"):
        constants.ENABLE_RAY_CLUSTER = False
