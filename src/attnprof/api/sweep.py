"""`attnprof sweep`'s and `attnprof results`' requests: their flags checked once.

A sweep's flags lie over its config file (or the defaults): the grid axes replace the file's
lists, the settings its [sweep] and [run] values; None means not given. run's boolean spellings
(`--no-causal`) mean `--causal false`, and both at once contradict. `--print-config` only
expands the grid, so it needs no torch and refuses --json (it prints the TOML it would run, not
a summary). A local sweep's --workers is capped to what the machine can hold (a note says so).

`results` filters a store: each list flag means "any of"; `--samples` belongs to the formats
that carry them (json, parquet) and is refused with the others.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attnprof.errors import AttnprofError, UserError

if TYPE_CHECKING:
    from attnprof.recommend import Recommendation
    from attnprof.store import Filters, StoredResult
    from attnprof.sweep import SweepConfig
    from attnprof.sweep.run import OnResult, OnStart, SweepSummary

__all__ = [
    "RecommendRequest",
    "RecommendResult",
    "ResultsRequest",
    "SweepFlags",
    "SweepRequest",
    "nothing_useful",
    "parse_list",
]

# how the comma list of each list-valued flag parses; the flag is --NAME with "-" for "_"
_LIST_KINDS = {
    **dict.fromkeys(("batch", "heads", "kv_heads", "seq", "kv_seq", "head_dim"), "int"),
    **dict.fromkeys(("causal", "compile", "backward"), "bool"),
    "mask": "semi",
    **dict.fromkeys(("phase", "dtype", "variants", "variant", "status", "device", "retry"), "str"),
}


def parse_list(name: str, raw: str | list[str]) -> list[Any]:
    """The values of the list flag --NAME (a comma list, or repeated: a list of them)."""
    from attnprof.sweep.grid import parse_bools, parse_ints, parse_masks, parse_strs

    parsers: dict[str, Callable[[str, str], list[Any]]] = {
        "int": parse_ints,
        "bool": parse_bools,
        "str": parse_strs,
        # masks hold commas (padding=512,384): separated by ';' or given again
        "semi": parse_masks,
    }
    if _LIST_KINDS[name] == "semi" and isinstance(raw, list):
        raw = ";".join(raw)
    text = ",".join(raw) if isinstance(raw, list) else raw
    return parsers[_LIST_KINDS[name]](text, "--" + name.replace("_", "-"))


@dataclass(frozen=True, kw_only=True)
class SweepFlags:
    """The flags of `attnprof sweep`, as the command got them (None: not given)."""

    config: Path | None = None
    batch: str | None = None
    heads: str | None = None
    kv_heads: str | None = None
    seq: str | None = None
    kv_seq: str | None = None
    head_dim: str | None = None
    dtype: str | None = None
    causal: str | None = None
    mask: list[str] | None = None
    backward: str | None = None
    phase: str | None = None
    variants: list[str] | None = None
    compile: str | None = None
    device: str | None = None
    store: Path | None = None
    executor: str | None = None
    ray_address: str | None = None
    ray_num_cpus: float | None = None
    workers: int | None = None
    timeout: float | None = None
    keep_traces: Path | None = None
    tensorboard: Path | None = None
    time_budget: float | None = None
    min_samples: int | None = None
    warmup: float | None = None
    no_profile: bool = False
    retry: str | None = None
    print_config: bool = False
    json_out: bool = False
    no_causal: bool = False
    no_compile: bool = False
    no_backward: bool = False


@dataclass(frozen=True, kw_only=True)
class SweepRequest:
    """A sweep to run (or only to print, print_config), checked (build it with from_flags)."""

    config: SweepConfig
    print_config: bool = False
    notes: tuple[str, ...] = field(default=())  # one line each, for stderr before the sweep

    @classmethod
    def from_flags(cls, flags: SweepFlags) -> SweepRequest:
        """The request, or UserError naming the first flag that is wrong or cannot apply."""
        from attnprof.api.flags import check_tensorboard_dir, positive

        f = flags
        for name, off, given in (("causal", f.no_causal, f.causal), ("compile", f.no_compile, f.compile),
                                 ("backward", f.no_backward, f.backward)):  # fmt: skip
            if off and given is not None:
                raise UserError(f"--no-{name} and --{name} {given} contradict each other: give one of them")
        if f.print_config and f.json_out:
            raise UserError("--print-config prints the expanded grid as TOML, not a summary: drop --json")
        axes = {
            "batch": f.batch, "heads": f.heads, "kv_heads": f.kv_heads, "seq": f.seq, "kv_seq": f.kv_seq,
            "head_dim": f.head_dim, "dtype": f.dtype, "causal": "false" if f.no_causal else f.causal,
            "variants": f.variants, "compile": "false" if f.no_compile else f.compile, "mask": f.mask,
            "backward": "false" if f.no_backward else f.backward,
            "phase": f.phase.replace("both", "prefill,decode") if f.phase else None,
        }  # fmt: skip
        settings: list[tuple[str, str, Any]] = [
            ("grid", "device", f.device),
            ("sweep", "store", str(f.store) if f.store else None),
            ("sweep", "executor", f.executor),
            ("sweep", "ray_address", f.ray_address),
            ("sweep", "ray_num_cpus", f.ray_num_cpus),
            ("sweep", "workers", f.workers),
            ("sweep", "timeout_s", f.timeout),
            ("sweep", "keep_traces", str(f.keep_traces) if f.keep_traces else None),
            ("sweep", "retry", parse_list("retry", f.retry) if f.retry else None),
            ("run", "time_budget_s", f.time_budget),
            ("run", "min_samples", f.min_samples),
            ("run", "warmup_s", f.warmup),
            ("run", "profile", False if f.no_profile else None),
            ("run", "tensorboard_dir", str(f.tensorboard.resolve()) if f.tensorboard else None),
        ]
        positive(f.time_budget, "--time-budget", "0.5")
        positive(f.warmup, "--warmup", "0.1")
        positive(f.timeout, "--timeout", "600")
        positive(f.ray_num_cpus, "--ray-num-cpus", "1")
        if f.min_samples is not None:
            positive(f.min_samples, "--min-samples", "10")
        if f.tensorboard is not None:
            check_tensorboard_dir(f.tensorboard)
        cfg = _config(f.config, axes, settings)
        if cfg.sweep.executor not in ("local", "ray"):
            raise UserError(f"unknown --executor {cfg.sweep.executor!r}: use local or ray")
        if cfg.sweep.workers < 0:
            raise UserError("--workers must be >= 1 (or 0 for the default)")
        if cfg.sweep.timeout_s < 0:
            raise UserError("--timeout must be positive seconds (0 for none)")
        if f.print_config:
            return cls(config=cfg, print_config=True)
        from attnprof.extras import require
        from attnprof.sweep.grid import check_size, default_variants

        # before the store is made or opened: a grid too large is refused with nothing written
        check_size(cfg, len(dict.fromkeys(cfg.grid.variants)) or len(default_variants()))
        require("torch", "attnprof sweep")  # --print-config above needs none: it only expands the grid
        notes = []
        if cfg.sweep.executor == "local" and cfg.sweep.workers > 1:
            from attnprof.sweep.local import worker_cap

            cap, why = worker_cap()
            if cfg.sweep.workers > cap:  # 1000 workers for one job made 400 processes and 20 GB
                notes.append(f"--workers {cfg.sweep.workers} lowered to {cap}: {why}")
                cfg.sweep.workers = cap
        return cls(config=cfg, notes=tuple(notes))

    def render_config(self) -> str:
        """The expanded grid and its job count, as TOML (what --print-config prints)."""
        from attnprof.sweep.grid import expand, render_config

        jobs, notes = expand(self.config)
        return render_config(self.config, jobs, notes)

    def execute(self, *, on_start: OnStart | None = None, on_result: OnResult | None = None) -> SweepSummary:
        """Run every job the store does not hold yet; a sweep that ran jobs and finished none
        raises nothing_useful's error (the summary is the caller's to show first: verdict)."""
        from attnprof.sweep import run_sweep

        return run_sweep(self.config, on_start=on_start, on_result=on_result)


def nothing_useful(summary: SweepSummary) -> AttnprofError | None:
    """A sweep that ran jobs and finished none, and had none stored before, is not a success
    (a resumed sweep that only re-ran its crashing job has its earlier results; that first
    sweep said so). Every one refused or unsupported is what was asked of this machine (exit
    2); any failure is exit 1."""
    if not summary.ran or summary.counts.get("ok") or summary.already:
        return None
    counts: Mapping[str, int] = summary.counts
    shown = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    text = (
        f"no job of this sweep finished ({shown}); the stored reasons: attnprof results --store "
        f"{summary.store} --status " + ",".join(sorted(counts))
    )
    if set(counts) <= {"refused", "unsupported", "skipped"}:
        return UserError(text)
    return AttnprofError(text)


def _config(config: Path | None, axes: dict[str, Any], settings: list[tuple[str, str, Any]]) -> SweepConfig:
    """The config file (or the defaults) with the grid axes and (section, key, value) settings
    given on the command line put over it; None means not given."""
    from attnprof.sweep.grid import load_config

    cfg = load_config(config)
    for name, raw in axes.items():
        if raw is not None:
            setattr(cfg.grid, name, parse_list(name, raw))
    for section, key, value in settings:
        if value is not None:
            setattr(getattr(cfg, section), key, value)
    return cfg


@dataclass(frozen=True, kw_only=True)
class ResultsRequest:
    """What `attnprof results` reads from a store and how it writes it (build with from_flags)."""

    store: Path
    filters: Filters
    fmt: str
    output: Path | None
    samples: bool

    @classmethod
    def from_flags(
        cls,
        store: Path,
        *,
        fmt: str = "table",
        output: Path | None = None,
        samples: bool = False,
        lists: Mapping[str, str | None] | None = None,
        causal: str | None = None,
    ) -> ResultsRequest:
        """lists: filter name (variant, status, dtype, seq, head_dim, batch, heads, device) ->
        its comma list as given (None: not given)."""
        from attnprof.outputs import refuse_inputs
        from attnprof.store import Filters, check_statuses
        from attnprof.store.export import FORMATS

        if fmt not in FORMATS:
            raise UserError(f"unknown --format {fmt!r}: use one of {', '.join(FORMATS)}")
        if samples and fmt not in ("json", "parquet"):
            raise UserError(f"--samples adds the raw timing samples to json and parquet, not to {fmt}: "
                            "add --format json (or parquet), or drop --samples")  # fmt: skip
        f = Filters()
        for name, raw in (lists or {}).items():
            if not raw:
                continue
            setattr(f, name, parse_list(name, raw))
            f.status = check_statuses(f.status, "--status")  # checked as soon as --status is read
        if causal:
            values = parse_list("causal", causal)
            if len(values) == 1:  # true,false: both, no filter
                f.causal = values[0]
        refuse_inputs(output, [store], option="-o/--output")
        return cls(store=store, filters=f, fmt=fmt, output=output, samples=samples)

    def rows(self) -> list[StoredResult]:
        from attnprof.store import Store

        with Store(self.store, readonly=True) as st:
            return st.query(self.filters, samples=self.samples)


@dataclass(frozen=True, kw_only=True)
class RecommendRequest:
    """`attnprof recommend`: the store's results ranked per bucket, and the policy file to write."""

    store: Path
    policy_out: Path | None = None

    @classmethod
    def from_flags(cls, store: Path, *, policy_out: Path | None = None) -> RecommendRequest:
        from attnprof.outputs import refuse_inputs

        refuse_inputs(policy_out, [store], option="--policy-out")
        return cls(store=store, policy_out=policy_out)

    def run(self) -> RecommendResult:
        """The recommendations; with policy_out, the policy written (whole or not at all)."""
        import json

        from attnprof.outputs import write_atomic
        from attnprof.recommend import build_policy, recommend
        from attnprof.store import Store

        with Store(self.store, readonly=True) as st:
            rows = st.query(samples=True)  # the samples give pinning's gain its interval
        if not rows:
            raise UserError(
                f"store {self.store} holds no results: run attnprof sweep --store {self.store} first"
            )
        recs = recommend(rows)
        left_out: list[str] = []
        if self.policy_out is not None:
            policy = build_policy(recs, source=str(self.store.resolve()))
            write_atomic(self.policy_out, json.dumps(policy, indent=2) + "\n", option="--policy-out")
            left_out = policy["left_out"]
        return RecommendResult(recommendations=recs, left_out=left_out)


@dataclass(frozen=True)
class RecommendResult:
    recommendations: list[Recommendation]
    left_out: list[str]  # the buckets the policy has no rule for (attnprof.policy: plain forwards)
