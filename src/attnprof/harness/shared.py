"""The inputs and the fp64 reference of one workload, built on first use and shared by the
variants that run on it (a run's suite, or one sweep job's variant)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from attnprof.harness.reference import Exact
    from attnprof.workload import Inputs, Workload

__all__ = ["Shared"]


class Shared:
    """The inputs and the fp64 reference of one workload, shared by the variants that run on it.

    Nothing is built up front: the inputs on first use by a variant that passed its checks (its
    capability, then its memory estimate, which counts whatever is still to be built here), the
    reference on first use by an accuracy check. A refused variant builds nothing.
    """

    def __init__(self, workload: Workload) -> None:
        self.workload = workload
        self._inputs: Inputs | None = None
        self._exact: Exact | None = None
        # `attnprof run` keeps every prepared variant built until the interleaved timing at the
        # end: the largest working set (beyond what stays allocated) among them, which runs in
        # turn while a later variant's tensors are held (memory_gate)
        self.prepared_transient = 0

    def pending_bytes(self, *, accuracy: bool) -> int:
        w = self.workload
        need = 0 if self._inputs is not None else w.input_bytes()
        if accuracy and self._exact is None:
            need += w.reference_bytes()
        return need

    def inputs(self) -> Inputs:
        if self._inputs is None:
            self._inputs = self.workload.make_inputs()
        return self._inputs

    def exact(self) -> Exact:
        if self._exact is None:
            import torch

            from attnprof.harness.reference import exact

            with torch.no_grad():
                self._exact = exact(self.workload, self.inputs())
        return self._exact
