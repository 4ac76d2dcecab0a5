"""`attnprof compare`'s request: run directories and trace files side by side, with the checks
asked for. A sweep's store is refused (it is `results`', `recommend`'s and `report`'s), an
expectations file loads before any work, and --strict without --expect is refused."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from attnprof.errors import UserError

if TYPE_CHECKING:
    from attnprof.compare.expect import ExpectationFile, ExpectationResult
    from attnprof.compare.records import Comparison

__all__ = ["CompareRequest", "CompareResult"]


@dataclass(frozen=True, kw_only=True)
class CompareRequest:
    paths: tuple[Path, ...]
    baseline: str | None = None
    spec: ExpectationFile | None = None  # the --expect file, loaded
    strict: bool = False
    diff: bool = False
    mixed_workloads: bool = False

    @classmethod
    def from_flags(
        cls,
        paths: list[Path],
        *,
        baseline: str | None = None,
        expect: str | None = None,
        strict: bool = False,
        diff: bool = False,
        mixed_workloads: bool = False,
    ) -> CompareRequest:
        from attnprof.api.flags import check_strict
        from attnprof.compare.expect import load_expectations
        from attnprof.store import is_store_file

        for p in paths:
            if is_store_file(p):
                raise UserError(
                    f"{p} is a sweep's results store, not a run or a trace: see it with "
                    f"`attnprof results --store {p}`, `attnprof recommend --store {p}` or `attnprof report {p}`"
                )
        check_strict(strict, expect)
        return cls(
            paths=tuple(paths),
            baseline=baseline,
            spec=load_expectations(expect) if expect else None,  # a bad file fails before any work
            strict=strict,
            diff=diff,
            mixed_workloads=mixed_workloads,
        )

    def run(self) -> CompareResult:
        from attnprof.compare.compare import compare
        from attnprof.compare.expect import check_comparison

        comp = compare(
            list(self.paths), baseline=self.baseline, diff=self.diff, mixed_workloads=self.mixed_workloads
        )
        results = check_comparison(comp, self.spec) if self.spec is not None else []
        return CompareResult(comparison=comp, spec=self.spec, expectations=results, strict=self.strict)


@dataclass(frozen=True, kw_only=True)
class CompareResult:
    comparison: Comparison
    spec: ExpectationFile | None
    expectations: list[ExpectationResult] = field(default_factory=list)
    strict: bool = False

    def enforce(self) -> None:
        """ExpectationMismatch (exit 3) when --strict and an expectation is not met."""
        from attnprof.compare.expect import enforce

        enforce(self.expectations, strict=self.strict)
