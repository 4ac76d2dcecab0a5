"""A sweep's configuration (flags or TOML) and its expansion into jobs.

One job = one (configuration, variant, eager|compile). The grid is the cartesian product of every
axis; combinations that are not a valid workload (heads not a multiple of kv_heads) are dropped and
counted, never silently. A TOML file has three tables, all optional:

    [grid]                       # every value is a list
    batch = [1]
    heads = [8]
    kv_heads = [0]               # 0 = same as heads (no GQA)
    seq = [512, 1024]
    kv_seq = [0]                 # 0 = same as seq
    head_dim = [64]
    dtype = ["fp32", "bf16"]
    causal = [true]
    mask = []                    # --mask values, e.g. ["causal", "sliding=256", "padding=512,384"];
                                 # empty = causal or none from `causal`
    backward = [false]           # true: forward + backward
    phase = ["prefill"]          # decode: seq is the number of new queries, kv_seq the cache length
    variants = ["naive-inplace", "sdpa-math", "sdpa-flash"]
    compile = [false]
    device = "auto"              # cpu, cuda (one worker per GPU), cuda:N; auto: cuda if there is one
    seed = 0

    [run]                        # how each job measures: the harness's RunOptions, as `attnprof run`
    steps = [1, 1, 3]
    profile = true
    warmup_calls = 3
    time_budget_s = 1.0
    warmup_s = 0.1               # warm-up by time before the clean timing
    min_samples = 10
    force = false                # run a job whose memory estimate is over the limit
    check_accuracy = true
    measure_peak = true

    [sweep]                      # where and how jobs run
    store = "attnprof-results.db"
    executor = "local"           # or "ray"
    workers = 0                  # 0 = one per visible GPU on cuda, 1 on cpu
    timeout_s = 600
    keep_traces = ""             # a folder to keep every job's trace in
    ray_address = ""
    ray_num_cpus = 1.0
    retry = []                   # statuses to run again, e.g. ["crashed", "timeout"]

Flags given on the command line override the file, axis by axis.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from attnprof.device import resolve_device
from attnprof.errors import UserError
from attnprof.harness.options import RunOptions
from attnprof.records import Mode, WorkloadRecord, mode_of, variant_label
from attnprof.workload import Workload, WorkloadId

__all__ = [
    "MAX_JOBS",
    "GridSpec",
    "JobSpec",
    "RunSettings",
    "SweepConfig",
    "SweepSettings",
    "check_size",
    "check_variant_name",
    "expand",
    "job_key",
    "load_config",
    "parse_bools",
    "parse_ints",
    "parse_masks",
    "parse_strs",
    "render_config",
]


def default_variants() -> list[str]:
    """Variants a sweep runs when none are named: the built-ins marked `sweep_default` in the
    registry (flex, which compiles for seconds per shape, and hub-flash, which needs the hub
    extra, only run when asked for). The registry imports no torch."""
    from attnprof.variants.registry import builtin_variants

    return [v.name for v in builtin_variants() if v.sweep_default]


# The largest grid a sweep expands (docs/sweeping.md): at half a second a job, about 14 hours
# on one worker; beyond it a sweep is refused before its jobs are made, with its size
MAX_JOBS = 100_000
# --print-config lists every job of a grid up to this many, else a sample (the first and last)
PRINT_JOBS = 200

# The grid axes that make a workload, outermost first: the order jobs are expanded in
_WORKLOAD_AXES = (
    "dtype",
    "phase",
    "backward",
    "causal",
    "mask",
    "head_dim",
    "batch",
    "heads",
    "kv_heads",
    "seq",
    "kv_seq",
)
# what an empty axis means: kv_heads/kv_seq 0 = same as heads/seq, mask "" = from `causal`
_EMPTY_AXIS: dict[str, list[Any]] = {"kv_heads": [0], "kv_seq": [0], "mask": [""]}


class GridSpec(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    batch: list[int] = msgspec.field(default_factory=lambda: [1])
    heads: list[int] = msgspec.field(default_factory=lambda: [8])
    kv_heads: list[int] = msgspec.field(default_factory=lambda: [0])
    seq: list[int] = msgspec.field(default_factory=lambda: [512])
    kv_seq: list[int] = msgspec.field(default_factory=lambda: [0])
    head_dim: list[int] = msgspec.field(default_factory=lambda: [64])
    dtype: list[str] = msgspec.field(default_factory=lambda: ["fp32"])
    causal: list[bool] = msgspec.field(default_factory=lambda: [True])
    mask: list[str] = msgspec.field(default_factory=list)
    backward: list[bool] = msgspec.field(default_factory=lambda: [False])
    phase: list[str] = msgspec.field(default_factory=lambda: ["prefill"])
    variants: list[str] = msgspec.field(default_factory=list)
    compile: list[bool] = msgspec.field(default_factory=lambda: [False])
    device: str = "auto"  # cpu, cuda (one worker per visible GPU), cuda:N, or auto
    seed: int = 0


# How each job measures is the harness's own RunOptions (the [run] table); the old name stays for
# code written against it. A job's tensorboard_dir gets a folder per configuration:
# <dir>/<job slug>/<variant>.<ts>.pt.trace.json.gz
RunSettings = RunOptions


class SweepSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    store: str = "attnprof-results.db"
    executor: str = "local"
    workers: int = 0
    timeout_s: float = 600.0
    keep_traces: str = ""
    ray_address: str = ""
    ray_num_cpus: float = 1.0
    retry: list[str] = msgspec.field(default_factory=list)


class SweepConfig(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    grid: GridSpec = msgspec.field(default_factory=GridSpec)
    run: RunOptions = msgspec.field(default_factory=RunOptions)
    sweep: SweepSettings = msgspec.field(default_factory=SweepSettings)


class JobSpec(msgspec.Struct, frozen=True, kw_only=True):
    """One job: a workload and a variant, eager or compiled."""

    workload: WorkloadRecord
    variant: str
    compile: bool = False

    @property
    def mode(self) -> Mode:
        return mode_of(self.compile)

    @property
    def label(self) -> str:
        """The variant as the harness and the store name it: `naive`, or `naive:compile`."""
        return variant_label(self.variant, self.mode)

    def describe(self) -> str:
        return f"{self.label} {WorkloadId.of(self.workload).describe()}"

    def slug(self) -> str:
        """A file-system name for this job's configuration (for --keep-traces folders)."""
        return WorkloadId.of(self.workload).slug


def job_key(spec: JobSpec, device_identity: str) -> str:
    """The unique key of a job: its configuration, variant, mode and the device it runs on.

    device_identity is the device's name as the worker sees it (e.g. "NVIDIA H200" or the CPU
    model), not its index: with one worker per GPU, cuda:0 and cuda:3 of one node are the same
    device for a result. Measurement settings (time budget, steps) are not part of the key.
    """
    w = spec.workload
    device_type = w.device.split(":", 1)[0]
    workload: list[Any] = [
        w.batch,
        w.heads,
        w.kv_heads,
        w.seq,
        w.kv_seq,
        w.head_dim,
        w.dtype,
        w.causal,
        w.seed,
    ]
    # added with --mask/--backward/--phase: only when not the defaults, so that the keys of
    # stores written before them stay the same (a sweep resumes over them)
    if w.mask not in ("", "causal", "none") or w.backward or w.phase != "prefill":
        workload += [w.mask, w.backward, w.phase]
    ident = {
        "workload": workload,
        "device": [device_type, device_identity],
        "variant": spec.variant,
        "mode": spec.mode,
    }
    return hashlib.sha256(msgspec.json.encode(ident)).hexdigest()[:40]


# -- parsing ----------------------------------------------------------------------------------


def _items(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


def parse_ints(text: str, flag: str) -> list[int]:
    out: list[int] = []
    for p in _items(text):
        try:
            out.append(int(p))
        except ValueError:
            raise UserError(
                f"{flag} {text!r}: {p!r} is not an integer; give a comma list like 512,1024"
            ) from None
    if not out:
        raise UserError(f"{flag} is empty: give a comma list like 512,1024")
    return out


def parse_strs(text: str, flag: str) -> list[str]:
    out = _items(text)
    if not out:
        raise UserError(f"{flag} is empty: give a comma list")
    return out


_TRUE = {"1", "true", "yes", "on", "causal"}
_FALSE = {"0", "false", "no", "off", "none", "full"}


def parse_bools(text: str, flag: str) -> list[bool]:
    out: list[bool] = []
    for p in _items(text.lower()):
        if p in ("both", "all"):
            out.extend([True, False])
        elif p in _TRUE:
            out.append(True)
        elif p in _FALSE:
            out.append(False)
        else:
            raise UserError(f"{flag} {text!r}: {p!r} is not one of true, false, both")
    if not out:
        raise UserError(f"{flag} is empty: give true, false or both")
    return list(dict.fromkeys(out))


def parse_masks(text: str, flag: str) -> list[str]:
    """--mask values: separated by ';' (a mask may hold commas: padding=512,384); a piece
    without '=' may also list plain masks with commas (causal,none). Checked and canonical."""
    from attnprof.masks import parse_mask

    out: list[str] = []
    for piece in (p.strip() for p in text.split(";")):
        if not piece:
            continue
        out.extend(parse_mask(piece).text for piece in ([piece] if "=" in piece else _items(piece)))
    if not out:
        raise UserError(f"{flag} is empty: give masks separated by ';', e.g. causal;sliding=256")
    return list(dict.fromkeys(out))


def load_config(path: str | Path | None) -> SweepConfig:
    """Read a sweep TOML file (or the defaults when path is None)."""
    if path is None:
        return SweepConfig()
    p = Path(path)
    if not p.is_file():
        raise UserError(f"sweep config {p} does not exist: give a TOML file or use grid flags")
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError:
            raise UserError(
                "reading a TOML sweep config on Python 3.10 needs tomli: pip install tomli"
            ) from None
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{p}: invalid TOML: {exc}") from None
    except UnicodeDecodeError:
        raise UserError(f"{p}: not a text file (TOML is UTF-8 text); give a sweep TOML file") from None
    except OSError as exc:
        raise UserError(f"{p}: cannot read ({exc.strerror})") from None
    try:
        return msgspec.convert(raw, type=SweepConfig)
    except msgspec.ValidationError as exc:
        raise UserError(f"{p}: {exc} (see `attnprof sweep --help` for the keys)") from None


def check_variant_name(name: str) -> str:
    """Fail fast on a misspelt variant, without importing a user's module in the sweep process
    (a user variant that crashes on import must crash a worker, not the sweep). A user file is
    made absolute: workers (Ray's above all) need not share the sweep's working directory."""
    if ":" in name:
        module, func = name.rsplit(":", 1)
        if module.endswith(".py"):
            if not Path(module).is_file():
                raise UserError(f"variant {name!r}: file {module} does not exist")
            return f"{Path(module).resolve()}:{func}"
        return name
    from attnprof.variants.registry import variant_names

    if name not in variant_names():
        raise UserError(
            f"unknown variant {name!r}: choose from {', '.join(variant_names())} "
            "(or module:function / file.py:function for your own)"
        )
    return name


def expand(cfg: SweepConfig) -> tuple[list[JobSpec], list[str]]:
    """The job list, in a stable order (configuration-major), and notes on dropped combinations."""
    g = cfg.grid
    if cfg.run.compile:
        raise UserError(
            "[run] compile: a sweep compiles per job; set [grid] compile = [true] (or --compile true)"
        )
    for name in ("batch", "heads", "seq", "head_dim", "dtype", "causal", "compile", "backward", "phase"):
        if not getattr(g, name):
            raise UserError(f"grid axis {name} is empty: give at least one value")
    bad = [p for p in g.phase if p not in ("prefill", "decode")]
    if bad:
        raise UserError(f"unknown phase {bad[0]!r}: use prefill, decode or both")
    # the spelling only: the executor checks that the GPUs are there where its jobs run
    device = resolve_device(g.device, flag="device", probe=False)
    variants = [check_variant_name(n) for n in dict.fromkeys(g.variants)] or default_variants()
    check_size(cfg, len(variants))
    jobs: list[JobSpec] = []
    dropped: dict[str, int] = {}
    no_twin = _no_twin_reasons() if any(g.compile) else {}
    seen: set[WorkloadRecord] = set()
    # only kv_heads and kv_seq may be empty (checked above): they then mean "same as heads/seq"
    for values in itertools.product(*(getattr(g, axis) or _EMPTY_AXIS[axis] for axis in _WORKLOAD_AXES)):
        axes: dict[str, Any] = dict(zip(_WORKLOAD_AXES, values, strict=True))
        if axes["kv_heads"] and axes["heads"] % axes["kv_heads"]:
            reason = "heads not a multiple of kv_heads"
            dropped[reason] = dropped.get(reason, 0) + 1
            continue
        try:
            wl = Workload(**axes, device=device, seed=g.seed).to_record()
        except UserError as exc:  # a mask that does not fit the shape, decode with seq > kv_seq
            reason = str(exc)
            dropped[reason] = dropped.get(reason, 0) + 1
            continue
        if wl in seen:  # kv_heads 0 and kv_heads == heads are the same workload
            continue
        seen.add(wl)
        for compiled in dict.fromkeys(g.compile):
            for variant in variants:
                if compiled and variant in no_twin:
                    reason = f"{variant} has no torch.compile twin: {no_twin[variant]}"
                    dropped[reason] = dropped.get(reason, 0) + 1
                    continue
                jobs.append(JobSpec(workload=wl, variant=variant, compile=compiled))
    notes = [f"{n} combination(s) dropped: {why}" for why, n in dropped.items()]
    if not jobs:
        raise UserError("the grid expands to no job: " + ("; ".join(notes) or "check its axes"))
    return jobs, notes


def check_size(cfg: SweepConfig, variants: int) -> int:
    """The grid's size before expansion (the product of its axes' lengths: an upper bound, as
    expansion drops impossible combinations); a grid over MAX_JOBS is refused with its size and
    its longest axes, before any job is made (8.4 million made 15 GB of jobs)."""
    g = cfg.grid
    axes = [(axis, len(getattr(g, axis) or _EMPTY_AXIS[axis])) for axis in _WORKLOAD_AXES]
    axes += [("compile", len(dict.fromkeys(g.compile))), ("variants", variants)]
    size = math.prod(n for _, n in axes)
    if size > MAX_JOBS:
        many = sorted((a for a in axes if a[1] > 1), key=lambda a: -a[1])
        longest = many[:3]
        shown = " x ".join(f"{n} {axis}" for axis, n in longest) + (" x ..." if len(many) > 3 else "")
        raise UserError(
            f"the grid has up to {size:,} jobs ({shown}), more than the {MAX_JOBS:,} a sweep takes: "
            f"give fewer values to --{longest[0][0].replace('_', '-')}, or split it into several sweeps "
            "(--print-config shows a grid's size)"
        )
    return size


def _no_twin_reasons() -> dict[str, str]:
    """Built-in variants without a torch.compile twin (flex: compiled already), with why."""
    from attnprof.variants.registry import builtin_variants

    return {v.name: v.no_twin_reason or "not compilable" for v in builtin_variants() if not v.can_compile}


# -- rendering --------------------------------------------------------------------------------


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(type(v))


def render_config(cfg: SweepConfig, jobs: Sequence[JobSpec], notes: Sequence[str]) -> str:
    """The effective configuration as TOML (loadable again) followed by the expanded job list."""
    lines: list[str] = []
    for table in ("grid", "run", "sweep"):
        lines.append(f"[{table}]")
        for key, value in msgspec.structs.asdict(getattr(cfg, table)).items():
            if table == "run" and key == "compile":
                continue  # the grid's compile axis says it (expand refuses it in [run])
            if table == "grid" and key == "variants" and not value:
                value = default_variants()
            if value is None:  # TOML has no null: an unset option is shown commented out
                lines.append(f"# {key} = (not set)")
                continue
            lines.append(f"{key} = {_toml_value(value)}")
        lines.append("")
    configs = list(dict.fromkeys((j.workload, j.compile) for j in jobs))
    lines.append(f"# {len(configs)} configuration(s) x variants = {len(jobs)} job(s)")
    lines.extend(f"# {n}" for n in notes)
    width = len(str(len(jobs)))
    numbered = [f"# {i:>{width}}  {j.describe()}" for i, j in enumerate(jobs, 1)]
    if len(numbered) > PRINT_JOBS:  # a sample: the first jobs and the last ones
        head, tail = PRINT_JOBS - 5, 5
        numbered = [*numbered[:head], f"# ... {len(jobs) - head - tail:,} more job(s) ...", *numbered[-tail:]]
    lines.extend(numbered)
    return "\n".join(lines) + "\n"
