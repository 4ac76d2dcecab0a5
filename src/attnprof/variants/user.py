"""User variants: `--variant my_module:my_attention` or `--variant path/to/file.py:my_attention`.

The callable takes q, k, v ([B, H, S, D]) and keywords is_causal and scale, and returns the
output in the same layout. The first line of its docstring becomes the description. For a mask
other than causal or none (--mask) it also gets attn_mask, exactly as F.scaled_dot_product_attention
takes it (bool, True = attend, or an additive float mask); a function without an attn_mask (or
**kwargs) parameter is then rejected with that reason.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnprof.errors import UserError
from attnprof.variants.base import Built, Decision, Variant

if TYPE_CHECKING:
    from attnprof.workload import Inputs, Workload

__all__ = ["load_user_variant"]


def _load_module(ref: str) -> Any:
    path = Path(ref)
    if ref.endswith(".py") or path.exists():
        if not path.is_file():
            raise UserError(f"user variant file {ref} does not exist: give an existing .py file")
        name = f"attnprof_user_{abs(hash(str(path.resolve())))}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise UserError(f"cannot import {ref} as a Python module: give a .py file")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # so pickling and torch.compile can find it
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            raise UserError(f"importing {ref} failed: {type(exc).__name__}: {exc}") from exc
        return module
    try:
        return importlib.import_module(ref)
    except ImportError as exc:
        raise UserError(
            f"cannot import module {ref!r} ({exc}): give module:function or file.py:function"
        ) from exc


def _no_exit(fn: Any, name: str) -> Any:
    """`fn` with its sys.exit (SystemExit) turned into an error of the call: a variant that
    exits fails alone, recorded with its exit code, instead of ending the run."""
    import functools

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except SystemExit as exc:
            raise RuntimeError(f"{name} called sys.exit({exc.code!r})") from None

    return call


def load_user_variant(spec: str) -> Variant:
    ref, _, func_name = spec.rpartition(":")
    if not ref or not func_name:
        raise UserError(f"user variant {spec!r} must look like module:function or file.py:function")
    module = _load_module(ref)
    fn = getattr(module, func_name, None)
    if not callable(fn):
        raise UserError(f"{ref} has no callable named {func_name!r}")
    fn = _no_exit(fn, func_name)
    doc = (fn.__doc__ or "").strip().splitlines()
    description = doc[0] if doc else f"user variant {func_name} from {ref}"

    try:
        params = inspect.signature(fn).parameters
        takes_mask = "attn_mask" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
    except (TypeError, ValueError):  # a builtin without a signature: try it
        takes_mask = True

    def capability(workload: Workload) -> Decision:
        from attnprof.variants.sdpa import mask_form

        form, desc = mask_form(workload)
        if form not in ("none", "is_causal") and not takes_mask:
            return Decision.no("user_mask", name=func_name, mask=workload.mask, form=desc)
        return Decision.ok()

    def build(workload: Workload, inputs: Inputs) -> Built:
        from attnprof.variants.sdpa import attn_mask, mask_form

        q, k, v, scale = inputs.q, inputs.k, inputs.v, inputs.scale
        form, desc = mask_form(workload)
        causal = form == "is_causal"
        if form in ("none", "is_causal"):
            return Built(call=lambda: fn(q, k, v, is_causal=causal, scale=scale), mask_path=desc)
        mask = attn_mask(workload, inputs)
        return Built(call=lambda: fn(q, k, v, is_causal=False, scale=scale, attn_mask=mask), mask_path=desc)

    return Variant(
        name=func_name if func_name not in ("forward", "attention") else f"{Path(ref).stem}.{func_name}",
        description=description,
        build=build,
        capability=capability,
        family="user",
        source=f"{Path(ref).resolve()}:{func_name}" if ref.endswith(".py") else spec,
        # unknown implementation: assume it may materialise the scores like a naive one
        score_tensors=2,
        scores_assumed=True,
    )
