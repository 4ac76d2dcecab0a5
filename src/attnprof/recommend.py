"""Recommend an attention variant per (device, dtype, shape bucket) from a sweep's results.

How the choice is made, per bucket:
- A bucket groups configurations by device (type and name), dtype, causal, head_dim, whether it
  is GQA, and sequence lengths rounded up to a power of two (q and kv separately): 300 and 512
  fall in the 512 bucket, 513 in the 1024 one.
- Only correct results count: status ok and accuracy within the dtype's tolerance (the harness's
  Accuracy.ok against the fp64 reference). A variant must be correct on every configuration of
  the bucket that some variant ran, or it is not a candidate.
- A candidate's score is the geometric mean, over the bucket's configurations, of its median
  time divided by the fastest median for that configuration (1.0 = fastest everywhere). The
  lowest score wins; the margin is the runner-up's score over the winner's (1.25 = 25% slower).
- Noise: a candidate's noise is the largest IQR/median among its measurements. A margin (or a
  gain over PyTorch's choice) smaller than the larger noise of the two compared is flagged as
  within noise: on a busy machine that is a tie, not a finding.
- PyTorch's own choice is the backend torch._fused_sdp_choice picks for the configuration, as the
  worker saw it on the device (stored per job). It is flagged where it differs from the fastest
  SDPA backend, the one a policy can pin.
- Pinning against PyTorch's default: the `sdpa` variant (default dispatch, no pin; the backend
  it actually ran is read from its trace) is measured like any other. pin_gain is its time over
  the fastest pinned backend's (geometric mean over the bucket's configurations; > 1: pinning is
  faster), with a 95% bootstrap interval from the stored samples by compare/rank.py's one rule
  (`samples_claim`): only with MIN_INTERVAL_SAMPLES samples a side on every configuration;
  with fewer the verdict is "too_few" (too few samples to tell; the range of the ratios is
  kept, never called a 95% interval). Where `sdpa` was not swept, the pinned variant of the
  backend PyTorch picks stands in for it. The verdict is "pin" only when the interval lies
  above 1; "default" when PyTorch's choice is at least as fast (interval below 1, or holding 1:
  a tie gives no reason to pin); None when there is nothing to compare. A policy pins a backend only where the verdict is "pin"; elsewhere its
  rule says "default" (PyTorch's own dispatch).
- Same kernel: where the `sdpa` variant ran the very backend that is the fastest pinned one, the
  two are one kernel and pinning changes nothing: pin_gain is 1 and the verdict "default",
  whatever the two jobs measured (a difference between them is drift, not the backends).
- Separate jobs: each variant is timed in its own job, one after the other, so the sample
  intervals do not hold the drift between jobs. On CPU that drift was measured: the same callable
  timed twice in a row on a quiet machine differed by up to 10% (benchmarks/bench_timing.py,
  docs/benchmarks.md), so on CPU a margin or a pinning gain is called a finding only beyond
  JOB_DRIFT as well as beyond the noise. On a GPU no such figure was measured, so none is applied.
- The winner and the runner-up can be one kernel too (`sdpa` that ran flash, and `sdpa-flash`):
  their margin is then drift between two jobs, not a difference between implementations, and is
  a tie (margin_same_kernel) whatever its size.
- Busy machine: a job whose timing the load meter flagged unreliable (other processes, steal,
  load average, spread; harness/load.py) cannot carry a verdict: where one of the measurements
  compared is such, the margin is a tie and the verdict "unknown" (the policy keeps PyTorch's
  dispatch), with the load's reasons in `unreliable`.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import Any, NamedTuple

import msgspec

from attnprof.compare.rank import Speed, samples_claim
from attnprof.records import RAN_STATUSES
from attnprof.store import StoredResult
from attnprof.workload import WorkloadId, kind_words

__all__ = [
    "POLICY_SCHEMA",
    "SDPA_BACKENDS",
    "Bucket",
    "Candidate",
    "Recommendation",
    "build_policy",
    "recommend",
    "seq_bucket",
]

POLICY_SCHEMA = "attnprof.policy/1"

# the drift between two timings of the same callable run one after the other, on CPU: up to 10%
# on a quiet 2-core machine (ratios 0.902-1.080, benchmarks/bench_timing.py run one timer after
# the other; docs/benchmarks.md). Separate sweep jobs are timed like that.
JOB_DRIFT = {"cpu": 0.10}

# PyTorch's own dispatch, unpinned: what pinning must beat
DEFAULT_DISPATCH = "sdpa"
# variants that are one pinned SDPA backend: what a policy can apply at run time
SDPA_BACKENDS = {
    "sdpa-math": "math",
    "sdpa-flash": "flash",
    "sdpa-efficient": "efficient",
    "sdpa-cudnn": "cudnn",
}


def seq_bucket(n: int) -> int:
    """The power of two at or above n: the top of n's bucket."""
    return 1 << max(0, (n - 1).bit_length())


class Bucket(msgspec.Struct, frozen=True, kw_only=True, order=True):
    device: str
    device_name: str
    dtype: str
    causal: bool
    head_dim: int
    gqa: bool
    seq_max: int
    kv_seq_max: int
    # what was run: jobs with another mask, with the backward or in decode are other workloads,
    # never ranked together (a variant's forward-only and fwd+bwd jobs of one shape would
    # otherwise stand for each other). With backward, candidates are ranked by forward + backward.
    mask: str = "causal"
    backward: bool = False
    phase: str = "prefill"

    @property
    def plain(self) -> bool:
        """What attnprof.policy can match at run time: a forward with a causal mask or none."""
        return self.mask in ("causal", "none") and not self.backward

    @property
    def seq_min(self) -> int:
        return self.seq_max // 2 + 1 if self.seq_max > 1 else 1

    @property
    def kv_seq_min(self) -> int:
        return self.kv_seq_max // 2 + 1 if self.kv_seq_max > 1 else 1

    def label(self, *, device: bool = False) -> str:
        """The bucket in a few characters, as every view writes it: dtype, head dim, the top of
        the lengths (S≤1024: 513 to 1024; kv≤ where K/V's differ), gqa, "full" where there is no
        causal mask, and with `device` the device type in brackets (for views that do not name
        it in a title)."""
        seq = f"S≤{self.seq_max}" + (f" kv≤{self.kv_seq_max}" if self.kv_seq_max != self.seq_max else "")
        kind = kind_words(self.mask, self.backward, self.phase)
        text = f"{self.dtype} D={self.head_dim} {seq}{' gqa' if self.gqa else ''}{kind}"
        return text + (f" [{self.device}]" if device else "")


class Candidate(msgspec.Struct, kw_only=True):
    variant: str  # with a ":compile" suffix for compiled twins
    score: float  # geometric mean of time / fastest time over the bucket's configurations
    median_ms: float  # geometric mean of the medians, for a feel of the absolute time
    noise: float  # the largest IQR / median among its measurements (0.05 = 5%)
    unreliable: bool = False  # some measurement of it was taken while the machine was busy


class Recommendation(msgspec.Struct, kw_only=True):
    bucket: Bucket
    configurations: int
    best: Candidate | None
    runner_up: Candidate | None
    margin: float | None  # runner_up.score / best.score
    within_noise: bool  # the margin is smaller than the timing noise of the two (or one kernel): a tie
    # the winner and the runner-up are one kernel (`sdpa` that ran the pinned one's backend)
    margin_same_kernel: bool = False
    best_sdpa: str | None  # fastest correct pinned SDPA backend among those measured (sdpa_measured)
    pytorch_choice: str | None  # what PyTorch's dispatch picks (majority over configurations)
    differs: bool  # best_sdpa is known and is not pytorch_choice
    gain_over_pytorch: float | None  # time(PyTorch's choice) / time(best_sdpa), when both ran
    gain_within_noise: bool  # that gain is smaller than the timing noise of the two backends
    candidates: list[Candidate]
    rejected: dict[str, str]  # variant -> why it is not a candidate
    # pinning the fastest SDPA backend against PyTorch's default dispatch (module docstring)
    default_variant: str | None = None  # what stands for the default: "sdpa", or a pinned twin
    default_backend: str | None = None  # the backend the default dispatch actually ran
    pin_gain: float | None = None  # time(default) / time(best pinned backend)
    # its 95% interval: only with compare/rank.py MIN_INTERVAL_SAMPLES samples a side on every
    # configuration; with fewer the verdict is "too_few" and the range of the ratios is given
    pin_gain_low: float | None = None
    pin_gain_high: float | None = None
    pin_samples: int | None = None  # samples on the smallest side of any configuration compared
    pin_gain_range_low: float | None = None
    pin_gain_range_high: float | None = None
    # the default dispatch ran the fastest pinned backend itself: one kernel, pin_gain 1 by
    # definition, not measured (two timings of one kernel differ by drift alone)
    same_kernel: bool = False
    # "pin", "default", "unknown" (busy machine), "too_few" (too few samples to tell), or None
    # (nothing to compare)
    verdict: str | None = None
    # the pinned SDPA backends timed correct in this bucket, fastest first: best_sdpa is the
    # fastest of these only, never of backends nobody measured
    sdpa_measured: list[str] = []
    # why the timing of the measurements compared cannot be trusted (the load meter's reasons)
    unreliable: list[str] = []


def _bucket(r: StoredResult) -> Bucket:
    """The job's workload identity (workload.py WorkloadId) with its lengths rounded up to
    their bucket and the device by type: every other field that changes the work stays."""
    w = WorkloadId.of(r)
    return Bucket(
        device=w.device.split(":", 1)[0],
        device_name=r.device_name or "",
        dtype=w.dtype,
        causal=w.causal,
        head_dim=w.head_dim,
        gqa=w.gqa,
        seq_max=seq_bucket(w.seq),
        kv_seq_max=seq_bucket(w.kv_seq),
        mask=w.mask,
        backward=w.backward,
        phase=w.phase,
    )


def _paced(r: StoredResult, bucket: Bucket) -> tuple[float | None, float | None, list[float]]:
    """(median, IQR, samples) a job is ranked by: forward + backward in a backward bucket (what a
    training step pays), else the forward."""
    if bucket.backward:
        t = r.timing_total
        return (t.median_ms, t.iqr_ms, list(t.samples_ms)) if t else (None, None, [])
    return r.median_ms, r.iqr_ms, list(r.samples_ms or [])


def _config(r: StoredResult) -> tuple[int, ...]:
    return (r.batch, r.heads, r.kv_heads, r.seq, r.kv_seq, r.seed)


def _geomean(xs: Sequence[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


class _Pin(NamedTuple):
    default: str | None = None  # what stands for the default dispatch: "sdpa" or a pinned twin
    backend: str | None = None  # the backend the default dispatch ran
    # the claim about time(default) / time(fastest pinned backend): compare/rank.py's rule, its
    # 95% interval only with enough samples ("too_few" and the range otherwise)
    claim: Speed | None = None
    gain: float | None = None  # that ratio; None where there is nothing to compare
    same_kernel: bool = False  # the default ran the fastest pinned backend itself: gain 1 by definition


def _one_kernel(a: Candidate, b: Candidate, backends: Counter[str]) -> bool:
    """Whether a and b ran the same kernel: the default dispatch, which ran one backend on every
    configuration of the bucket, and the variant pinned to that backend."""
    pair = {a.variant, b.variant}
    if DEFAULT_DISPATCH not in pair or len(backends) != 1:
        return False
    (pinned,) = pair - {DEFAULT_DISPATCH}
    return SDPA_BACKENDS.get(pinned) == next(iter(backends))


def _pin_against_default(
    pinned: list[Candidate],
    default_cand: Candidate | None,
    choice: str | None,
    samples: dict[str, dict[tuple[int, ...], list[float]]],
    backends: Counter[str],
    configs: set[tuple[int, ...]],
) -> _Pin:
    """PyTorch's default dispatch against the fastest pinned backend (_Pin's fields)."""
    if not pinned:
        return _Pin()
    best = pinned[0]
    default = default_cand
    backend = backends.most_common(1)[0][0] if backends else choice
    if default is None and choice:  # `sdpa` not swept: the pinned twin of PyTorch's pick stands in
        default = next((c for c in pinned if SDPA_BACKENDS[c.variant] == choice), None)
        backend = choice
    if default is None:
        return _Pin(backend=backend)
    if default is best or (default.variant == DEFAULT_DISPATCH and backend == SDPA_BACKENDS[best.variant]):
        # one kernel: nothing to pin, whatever their two timings say (module docstring)
        return _Pin(default.variant, backend, None, 1.0, same_kernel=True)
    pairs = [(samples[default.variant].get(c, []), samples[best.variant].get(c, [])) for c in sorted(configs)]
    gain = default.score / best.score
    return _Pin(default.variant, backend, samples_claim(pairs, ratio=gain), gain)


def _recommend_bucket(bucket: Bucket, rows: list[StoredResult]) -> Recommendation:
    times: dict[str, dict[tuple[int, ...], float]] = defaultdict(dict)
    samples: dict[str, dict[tuple[int, ...], list[float]]] = defaultdict(dict)
    backends: Counter[str] = Counter()
    noise: dict[str, float] = defaultdict(float)
    busy: dict[str, list[str]] = defaultdict(list)  # variant -> the load meter's reasons
    rejected: dict[str, str] = {}
    choices: Counter[str] = Counter()
    for r in rows:
        if r.pytorch_choice:
            choices[r.pytorch_choice] += 1
        label = r.label
        median, iqr, sampled = _paced(r, bucket)
        if r.status not in RAN_STATUSES or median is None:
            rejected.setdefault(
                label, f"{r.status}: {(r.reason or '').splitlines()[0][:120]}" if r.reason else r.status
            )
        elif r.accuracy_ok is not True:
            err = f"{r.max_abs_err:.3g}" if r.max_abs_err is not None else "unknown"
            word = "incorrect: " if r.status == "incorrect" else ""  # else unchecked: not known correct
            rejected.setdefault(label, f"{word}outside the {r.dtype} tolerance (max abs error {err})")
        else:
            times[label][_config(r)] = median
            samples[label][_config(r)] = sampled
            if label == DEFAULT_DISPATCH and r.backend:
                backends[r.backend] += 1
            if iqr is not None and median > 0:
                noise[label] = max(noise[label], iqr / median)
            if r.load is not None and r.load.unreliable:
                busy[label] += r.load.reasons or ["busy"]
    configs = {c for t in times.values() for c in t}
    fastest = {c: min(t[c] for t in times.values() if c in t) for c in configs}
    cands: list[Candidate] = []
    for label, t in times.items():
        if label in rejected:
            continue  # incorrect or failed on some configuration of the bucket
        missing = configs - set(t)
        if missing:
            rejected[label] = f"not run on {len(missing)} of the bucket's {len(configs)} configurations"
            continue
        cands.append(
            Candidate(
                variant=label,
                score=_geomean([t[c] / fastest[c] for c in configs]),
                median_ms=_geomean(list(t.values())),
                noise=noise[label],
                unreliable=label in busy,
            )
        )
    cands.sort(key=lambda c: (c.score, c.median_ms, c.variant))
    best = cands[0] if cands else None
    runner = cands[1] if len(cands) > 1 else None
    pinned = [c for c in cands if c.variant in SDPA_BACKENDS]
    best_sdpa = SDPA_BACKENDS[pinned[0].variant] if pinned else None
    choice = choices.most_common(1)[0][0] if choices else None
    default_cand = next((c for c in cands if c.variant == DEFAULT_DISPATCH), None)
    pin = _pin_against_default(pinned, default_cand, choice, samples, backends, configs)
    default, sp, pin_gain = pin.default, pin.claim, pin.gain
    iv = sp if sp is not None and sp.claim != "too_few" else None  # a 95% interval, or none
    drift = JOB_DRIFT.get(bucket.device, 0.0)
    compared = [c for c in cands if c.variant in (default, pinned[0].variant if pinned else None)]
    verdict = None
    if pin_gain is not None and default is not None:
        if default == pinned[0].variant or pin.same_kernel:
            verdict = "default"  # PyTorch's pick is the fastest pinned backend, or the same kernel
        elif any(c.unreliable for c in compared):
            verdict = "unknown"  # timed on a busy machine: no verdict either way
        elif iv is not None and iv.low is not None:
            verdict = "pin" if iv.low > 1.0 + drift else "default"
        else:  # too few samples for an interval (or none stored): no claim either way
            verdict = "too_few"
    sdpa = pinned
    gain = None
    gain_noisy = False
    if best_sdpa and choice:
        picked = next((c for c in sdpa if SDPA_BACKENDS[c.variant] == choice), None)
        if picked is not None:
            gain = picked.score / sdpa[0].score
            gain_noisy = gain - 1.0 <= max(picked.noise, sdpa[0].noise, drift) or (
                picked.unreliable or sdpa[0].unreliable
            )
    margin = (runner.score / best.score) if best and runner else None
    same_kernel = bool(best and runner and _one_kernel(best, runner, backends))
    return Recommendation(
        bucket=bucket,
        configurations=len(configs),
        best=best,
        runner_up=runner,
        margin=margin,
        within_noise=bool(
            best
            and runner
            and margin is not None
            and (
                margin - 1.0 <= max(best.noise, runner.noise, drift)
                or best.unreliable
                or runner.unreliable
                or same_kernel
            )
        ),
        margin_same_kernel=same_kernel,
        best_sdpa=best_sdpa,
        pytorch_choice=choice,
        differs=bool(best_sdpa and choice and best_sdpa != choice),
        gain_over_pytorch=gain,
        gain_within_noise=gain_noisy,
        candidates=cands,
        rejected=dict(sorted(rejected.items())),
        default_variant=default,
        default_backend=pin.backend,
        pin_gain=pin_gain,
        same_kernel=pin.same_kernel,
        pin_gain_low=iv.low if iv else None,
        pin_gain_high=iv.high if iv else None,
        pin_samples=sp.n if sp is not None else None,
        pin_gain_range_low=sp.range_low if sp is not None and iv is None else None,
        pin_gain_range_high=sp.range_high if sp is not None and iv is None else None,
        verdict=verdict,
        sdpa_measured=[SDPA_BACKENDS[c.variant] for c in pinned],
        unreliable=sorted(
            {why for c in compared + [x for x in (best, runner) if x] for why in busy.get(c.variant, [])}
        ),
    )


def recommend(rows: Iterable[StoredResult]) -> list[Recommendation]:
    """One recommendation per bucket, in bucket order (device, dtype, ..., sequence length)."""
    groups: dict[Bucket, list[StoredResult]] = defaultdict(list)
    for r in rows:
        groups[_bucket(r)].append(r)
    return [_recommend_bucket(b, groups[b]) for b in sorted(groups)]


def build_policy(recs: Iterable[Recommendation], *, source: str = "") -> dict[str, Any]:
    """The policy file's content: one rule per bucket of plain forwards (causal or no mask, no
    backward: what attnprof.policy can tell apart at run time) that has a correct SDPA backend;
    the other buckets are named under `left_out`."""
    rules = []
    left_out = []
    for rec in recs:
        if rec.best_sdpa is not None and not rec.bucket.plain:
            left_out.append(rec.bucket.label(device=True))
        if rec.best_sdpa is None or not rec.bucket.plain:
            continue  # attnprof.policy matches plain forwards only: no rule it would misapply
        # pin only where the verdict is "pin" (it beat PyTorch's own dispatch beyond noise); no
        # verdict (PyTorch's dispatch never measured, a busy machine) leaves the choice to PyTorch
        backend = rec.best_sdpa if rec.verdict == "pin" else "default"
        b = rec.bucket
        rules.append(
            {
                "device": b.device,
                "device_name": b.device_name,
                "dtype": b.dtype,
                "causal": b.causal,
                "head_dim": b.head_dim,
                "gqa": b.gqa,
                "seq_min": b.seq_min,
                "seq_max": b.seq_max,
                "kv_seq_min": b.kv_seq_min,
                "kv_seq_max": b.kv_seq_max,
                "backend": backend,
                "verdict": rec.verdict,
                "sdpa_measured": rec.sdpa_measured,
                "pin_gain": rec.pin_gain,
                "pin_gain_interval": [rec.pin_gain_low, rec.pin_gain_high]
                if rec.pin_gain_low is not None
                else None,
                "same_kernel": rec.same_kernel,
                "pytorch_choice": rec.pytorch_choice,
                "best_variant": rec.best.variant if rec.best else None,
                "gain_over_pytorch": rec.gain_over_pytorch,
                "gain_within_noise": rec.gain_within_noise,
            }
        )
    return {
        "schema": POLICY_SCHEMA,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "source": source,
        "rules": rules,
        "left_out": left_out,
    }
