"""What a variant is: Variant (a small frozen record), the Decision of its capability check, and
the Built call it makes. The family modules (naive.py, sdpa.py, flex.py, hub.py, user.py) build
Variants from these records; registry.py imports the families and looks variants up, so no
family imports the registry."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from attnprof.reasons import english, reason
from attnprof.records import ReasonCode, mode_of, variant_label

if TYPE_CHECKING:
    import torch

    from attnprof.workload import Inputs, Workload

__all__ = ["Builder", "Built", "Capability", "Decision", "Layout", "Variant"]

Layout = Literal["BHSD", "BSHD"]


@dataclass(frozen=True)
class Decision:
    """accepted, or rejected with a reason specific enough to act on: in English (`reason`) and
    as data (`reason_code`: a code of attnprof.reasons and its fields)."""

    accepted: bool
    reason: str | None = None
    reason_code: ReasonCode | None = None

    def __post_init__(self) -> None:
        if not self.accepted and self.reason_code is None:
            raise ValueError("a rejection records its reason code: build it with Decision.no")

    @classmethod
    def ok(cls) -> Decision:
        return cls(True, None)

    @classmethod
    def no(cls, code: str, *parts: ReasonCode, **args: str | int | float) -> Decision:
        why = reason(code, *parts, **args)
        return cls(False, english(why), why)


@dataclass(frozen=True)
class Built:
    """A ready-to-call forward. `call` is what is timed and profiled; `to_bhsd` converts its
    output (and, with backward, the gradients of `leaves`) back to [B, H, S, D] for the accuracy
    check, outside the timed region."""

    call: Callable[[], torch.Tensor]
    to_bhsd: Callable[[torch.Tensor], torch.Tensor] = field(default=lambda t: t)
    # the tensors the backward differentiates (q, k, v in this variant's layout); None: the inputs'
    leaves: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
    mask_path: str | None = None  # how this variant expressed the mask (is_causal, attn_mask, ...)
    block_sparsity: float | None = None  # flex: share of the block mask's blocks skipped
    flops_executed: float | None = None  # forward FLOPs it computes, when not the workload's model
    notes: tuple[str, ...] = ()
    # where `call` enters a context on every call (an SDPA backend pinned with sdpa_kernel):
    # the context, and the call without it, so that the clean timing enters it once per sample,
    # outside the clock (harness/timing.py Scoped); every other use calls `call`
    scope: Callable[[], AbstractContextManager[Any]] | None = None
    bare: Callable[[], torch.Tensor] | None = None


Builder = Callable[["Workload", "Inputs"], Built]
Capability = Callable[["Workload"], Decision]


@dataclass(frozen=True)
class Variant:
    name: str
    description: str
    build: Builder
    capability: Capability
    layout: Layout = "BHSD"
    # how many B*H*Sq*Skv score tensors (of score_dtype size) a call keeps alive at its peak;
    # 0 for fused kernels that never materialise the scores
    score_tensors: float = 0.0
    score_fp32: bool = False  # scores held in fp32 whatever the input dtype (math backend upcast)
    scores_assumed: bool = False  # score_tensors is a safe assumption, not the variant's knowledge
    backend: str | None = None  # the backend this variant pins, if any
    compiled: bool = False
    can_compile: bool = True  # whether a torch.compile twin makes sense
    no_twin_reason: str = ""  # why not, when it does not (said when --compile skips it)
    sweep_default: bool = True  # run by `attnprof sweep` when no variants are named
    family: str = "builtin"
    source: str | None = None  # a user variant's module:function / file.py:function, to load it again
    # bytes of the tensors it builds to express the workload's mask (dense masks, biases)
    mask_bytes: Callable[[Workload], int] | None = None

    @property
    def mode(self) -> Literal["eager", "compile"]:
        return mode_of(self.compiled)

    @property
    def label(self) -> str:
        """Unique name in a run: the compiled twin of `naive` is `naive:compile`."""
        return variant_label(self.name, self.mode)

    @property
    def materialises(self) -> bool:
        return self.score_tensors > 0

    @property
    def known_materialises(self) -> bool | None:
        """What run.json records as `materialises`: None when score_tensors is an assumption
        (a user's implementation, sized like a naive one for the memory gate), not knowledge."""
        return None if self.scores_assumed else self.materialises

    def mask_cost(self, workload: Workload) -> int:
        """Bytes of what it builds to express the mask; a materialising variant builds it dense."""
        if self.mask_bytes is not None:
            return self.mask_bytes(workload)
        return workload.dense_mask_bytes() if self.materialises else 0

    def estimate_bytes(self, workload: Workload) -> int:
        """Memory one call needs beyond the shared inputs: the score tensors it materialises,
        the mask tensors it builds, and a fused kernel's small workspace (output, log-sum-exp,
        transposed copies). With backward: the probabilities saved for it and the score-sized
        gradients of a materialising variant (two more score tensors), and a fused kernel's
        saved output and gradient workspace (three times the forward's)."""
        e = 4 if self.score_fp32 else workload.element_size
        tensors = self.score_tensors + (2 if workload.backward and self.materialises else 0)
        scores = int(tensors * workload.score_bytes(e))
        if self.score_fp32 and workload.element_size != 4:
            # the math backend upcasts q, k, v and the output to fp32 first
            scores += int(workload.bytes_min() * 4 / workload.element_size)
        out_like = workload.batch * workload.heads * workload.seq * workload.head_dim
        workspace = 2 * out_like * workload.element_size + workload.batch * workload.heads * workload.seq * 4
        if workload.backward:
            workspace *= 3
        return scores + workspace + self.mask_cost(workload)

    def compiled_twin(self) -> Variant:
        return replace(self, compiled=True, build=_compiled_builder(self.build))


def _compiled_builder(build: Builder) -> Builder:
    def compiled(workload: Workload, inputs: Inputs) -> Built:
        from attnprof.variants.compiling import compile_call

        built = build(workload, inputs)
        # within dynamo's recompile limit: past it the call would run eager, labelled compiled
        fn = compile_call(built.call, dynamic=False)
        return replace(built, call=fn)

    return compiled
