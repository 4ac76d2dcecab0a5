"""Kernel names a person can read: the profiler records whole C++ signatures."""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["short_name"]

_STRIP = re.compile(r"^(void|std::enable_if<[^>]*>::type)\s+")
_NS = re.compile(
    r"\b(at::native::|at::cuda::|\(anonymous namespace\)::|c10::|cutlass::|at::detail::|std::|binary_internal::)"
)


def _cut_params(name: str) -> str:
    """Drop the parameter list: the first '(' at template depth 0 (kept when it opens the name)."""
    depth = 0
    for i, ch in enumerate(name):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif ch == "(" and depth == 0 and i > 0:
            return name[:i]
    return name


def _collapse(name: str, keep_depth: int) -> str:
    out, depth = [], 0
    for ch in name:
        if ch == "<":
            depth += 1
            if depth == keep_depth + 1:
                out.append("<…")
            if depth > keep_depth:
                continue
        elif ch == ">":
            depth -= 1
            if depth == keep_depth:
                out.append(">")
            if depth >= keep_depth:
                continue
        if depth <= keep_depth:
            out.append(ch)
    return "".join(out)


@lru_cache(maxsize=8192)  # a region lists up to 500 ops, most of them the same few kernels
def short_name(name: str, width: int = 60) -> str:
    """A kernel name a person can read in a table: no 'void', no parameters, fewer namespaces,
    inner template arguments folded, cut to width. Memcpy / memset names are kept whole."""
    if name.startswith(("Memcpy", "Memset")):
        return name if len(name) <= width else name[: width - 1] + "…"
    s = _STRIP.sub("", name.strip()).replace("(anonymous namespace)::", "")
    s = _NS.sub("", _cut_params(s))
    for depth in (2, 1):  # fold inner template arguments until it fits; the outer ones name the op
        if len(s) > width:
            s = _collapse(s, depth)
    if len(s) > width:
        s = s[: width - 1] + "…"
    return s
