"""The variant registry: a closed, discoverable set of attention implementations.

A variant is a small frozen record (STYLE.md 3, variants/base.py): a name, a one-line description, the tensor
layout it wants, a capability check returning accepted or rejected-with-a-specific-reason for
a workload, and a builder that turns the workload's inputs into a zero-argument forward call.
Built-ins live in one module per family (naive.py, sdpa.py, flex.py, hub.py); user variants are
loaded from `module:function` or `path/to/file.py:function` (user.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from attnprof.errors import UserError
from attnprof.extras import require
from attnprof.records import mode_of, variant_label

# the records a variant is made of live in base.py, which the family modules import; the registry
# imports the families, and hands these records out with them
from attnprof.variants.base import Built, Decision, Variant

if TYPE_CHECKING:
    from attnprof.workload import Workload

__all__ = [
    "Built",
    "Decision",
    "Variant",
    "builtin_variants",
    "check",
    "get_variant",
    "list_variants",
    "resolve_variants",
    "variant_names",
]


def builtin_variants() -> list[Variant]:
    from attnprof.variants import flex, hub, naive, sdpa

    return [*naive.VARIANTS, *sdpa.VARIANTS, *flex.VARIANTS, *hub.VARIANTS]


def variant_names() -> list[str]:
    return [v.name for v in builtin_variants()]


def get_variant(name: str, *, compiled: bool = False) -> Variant:
    """A built-in by name, or a user variant given as `module:function` / `file.py:function`;
    its torch.compile twin with `compiled`. A label as people type it (`naive:compile`, on the
    command line or in run.json's pending list) names the twin too."""
    if name.endswith(":compile"):  # a label: the typed pair is (name without it, compiled)
        name, compiled = name.removesuffix(":compile"), True
    if ":" in name:
        from attnprof.variants.user import load_user_variant

        v = load_user_variant(name)
    else:
        if name.endswith(".py"):  # a file without its function: say what is missing
            raise UserError(
                f"-v {name} names a file but no function: give FILE.py:FUNCTION, e.g. -v {name}:my_attention"
            )
        found = [b for b in builtin_variants() if b.name == name]
        if not found:
            raise UserError(
                f"unknown variant {variant_label(name, mode_of(compiled))!r}: choose from "
                f"{', '.join(variant_names())} (or module:function / file.py:function for your own)"
            )
        v = found[0]
    if not compiled:
        return v
    if not v.can_compile:
        why = f": {v.no_twin_reason}" if v.no_twin_reason else ""
        raise UserError(f"variant {name!r} has no torch.compile twin{why}")
    return v.compiled_twin()


def check(variant: Variant, workload: Workload) -> Decision:
    """The variant's own capability check, plus what torch.compile needs for a compiled twin."""
    decision = variant.capability(workload)
    if decision.accepted and variant.compiled:
        from attnprof.variants.flex import compiler_problem

        problem = compiler_problem(workload)
        if problem:
            return Decision.no(problem, name=variant.label)
    return decision


def resolve_variants(names: list[str] | None, *, compile: bool = False) -> list[Variant]:
    """Variants to run: the named ones (in order, duplicates dropped) or every built-in, plus
    compiled twins of those where a twin makes sense when `compile` is set."""
    chosen = [get_variant(n) for n in names] if names else builtin_variants()
    seen: set[str] = set()
    out: list[Variant] = []
    for v in chosen:
        if v.label not in seen:
            seen.add(v.label)
            out.append(v)
    if compile:
        for v in list(out):
            if not v.compiled and v.can_compile and v.family == "builtin":
                twin = v.compiled_twin()
                if twin.label not in seen:
                    seen.add(twin.label)
                    out.append(twin)
    return out


def list_variants(workload: Workload) -> list[tuple[Variant, Decision]]:
    """Every built-in variant with its availability for `workload` (device, dtype, shape)."""
    require("torch", "attnprof.list_variants()")
    return [(v, check(v, workload)) for v in builtin_variants()]
