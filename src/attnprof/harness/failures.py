"""How a variant (or a model's implementation) that did not run, or failed, is recorded.

A refusal is `reject` (its status and reason code); a failure at run time is `record_failure`
(oom or error, with the exception's first line). An exception raised while Ctrl-C was being
handled is the Ctrl-C, never a variant's failure (`reraise_interrupt`). Shared by harness/run.py,
harness/prepare.py and models/.
"""

from __future__ import annotations

from attnprof.errors import first_line
from attnprof.harness.cuda import release_memory
from attnprof.reasons import english
from attnprof.records import ReasonCode, RunResult, Status

__all__ = ["record_failure", "reject", "reraise_interrupt"]


def _is_oom(exc: BaseException) -> bool:
    text = str(exc).lower()
    return isinstance(exc, MemoryError) or "out of memory" in text or "can't allocate memory" in text


def record_failure(
    result: RunResult, stage: str, exc: BaseException, device: str, *, status: Status | None = None
) -> None:
    """A variant (or a model's implementation) that failed while running: oom or error (or the
    caller's `status`), with the exception's first line as the reason. An exception raised while
    handling Ctrl-C is the Ctrl-C, not a failure of the variant: re-raised as KeyboardInterrupt."""
    reraise_interrupt(exc)
    result.status = status or ("oom" if _is_oom(exc) else "error")
    result.reason = f"{result.label} failed during {stage}: {type(exc).__name__}: {first_line(exc)[:300]}"
    # after a sticky CUDA error empty_cache raises too; raising here, inside the caller's except,
    # would lose run.json and keep a poisoned sweep worker (harness/cuda.py)
    cleanup = release_memory(device)
    if cleanup is not None:
        result.warnings.append(
            f"the CUDA context is unusable after this error (empty_cache: {cleanup[:200]})"
        )


def reraise_interrupt(exc: BaseException) -> None:
    """Raise KeyboardInterrupt if `exc` was raised while a KeyboardInterrupt was being handled.
    torch.profiler does that: Ctrl-C landing while a profile starts leaves it uninitialised, and
    its __exit__ then raises "AssertionError: Profiler must be initialized ..." in the Ctrl-C's
    place, which a variant's `except Exception` would record as the variant's failure."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt):
            raise KeyboardInterrupt from None
        seen.add(id(e))
        e = e.__cause__ or e.__context__


def reject(result: RunResult, status: Status, why: ReasonCode) -> None:
    """A variant (or a model's implementation) that does not run: its status, and its reason in
    English and as data."""
    result.status, result.reason, result.reason_code = status, english(why), why
