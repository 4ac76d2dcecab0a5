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
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import Any

import msgspec

from attnprof.store import StoredResult

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

    @property
    def seq_min(self) -> int:
        return self.seq_max // 2 + 1 if self.seq_max > 1 else 1

    @property
    def kv_seq_min(self) -> int:
        return self.kv_seq_max // 2 + 1 if self.kv_seq_max > 1 else 1

    def describe(self) -> str:
        seq = f"S {self.seq_min}-{self.seq_max}"
        if self.kv_seq_max != self.seq_max:
            seq += f" kv {self.kv_seq_min}-{self.kv_seq_max}"
        return f"{self.dtype} D={self.head_dim} {seq}{' gqa' if self.gqa else ''} {'causal' if self.causal else 'full'}"


class Candidate(msgspec.Struct, kw_only=True):
    variant: str  # with a ":compile" suffix for compiled twins
    score: float  # geometric mean of time / fastest time over the bucket's configurations
    median_ms: float  # geometric mean of the medians, for a feel of the absolute time
    noise: float  # the largest IQR / median among its measurements (0.05 = 5%)


class Recommendation(msgspec.Struct, kw_only=True):
    bucket: Bucket
    configurations: int
    best: Candidate | None
    runner_up: Candidate | None
    margin: float | None  # runner_up.score / best.score
    within_noise: bool  # the margin is smaller than the timing noise of the two: call it a tie
    best_sdpa: str | None  # fastest correct pinned SDPA backend: math, flash, efficient, cudnn
    pytorch_choice: str | None  # what PyTorch's dispatch picks (majority over configurations)
    differs: bool  # best_sdpa is known and is not pytorch_choice
    gain_over_pytorch: float | None  # time(PyTorch's choice) / time(best_sdpa), when both ran
    gain_within_noise: bool  # that gain is smaller than the timing noise of the two backends
    candidates: list[Candidate]
    rejected: dict[str, str]  # variant -> why it is not a candidate


def _bucket(r: StoredResult) -> Bucket:
    return Bucket(
        device=r.device.split(":", 1)[0],
        device_name=r.device_name or "",
        dtype=r.dtype,
        causal=r.causal,
        head_dim=r.head_dim,
        gqa=r.kv_heads != r.heads,
        seq_max=seq_bucket(r.seq),
        kv_seq_max=seq_bucket(r.kv_seq),
    )


def _config(r: StoredResult) -> tuple[int, ...]:
    return (r.batch, r.heads, r.kv_heads, r.seq, r.kv_seq, r.seed)


def _geomean(xs: Sequence[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _recommend_bucket(bucket: Bucket, rows: list[StoredResult]) -> Recommendation:
    times: dict[str, dict[tuple[int, ...], float]] = defaultdict(dict)
    noise: dict[str, float] = defaultdict(float)
    rejected: dict[str, str] = {}
    choices: Counter[str] = Counter()
    for r in rows:
        if r.pytorch_choice:
            choices[r.pytorch_choice] += 1
        label = r.label
        if r.status != "ok" or r.median_ms is None:
            rejected.setdefault(
                label, f"{r.status}: {(r.reason or '').splitlines()[0][:120]}" if r.reason else r.status
            )
        elif r.accuracy_ok is not True:
            err = f"{r.max_abs_err:.3g}" if r.max_abs_err is not None else "unknown"
            rejected.setdefault(label, f"outside the {r.dtype} tolerance (max abs error {err})")
        else:
            times[label][_config(r)] = r.median_ms
            if r.iqr_ms is not None and r.median_ms > 0:
                noise[label] = max(noise[label], r.iqr_ms / r.median_ms)
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
            )
        )
    cands.sort(key=lambda c: (c.score, c.median_ms, c.variant))
    best = cands[0] if cands else None
    runner = cands[1] if len(cands) > 1 else None
    sdpa = [c for c in cands if c.variant in SDPA_BACKENDS]
    best_sdpa = SDPA_BACKENDS[sdpa[0].variant] if sdpa else None
    choice = choices.most_common(1)[0][0] if choices else None
    gain = None
    gain_noisy = False
    if best_sdpa and choice:
        picked = next((c for c in sdpa if SDPA_BACKENDS[c.variant] == choice), None)
        if picked is not None:
            gain = picked.score / sdpa[0].score
            gain_noisy = gain - 1.0 <= max(picked.noise, sdpa[0].noise)
    margin = (runner.score / best.score) if best and runner else None
    return Recommendation(
        bucket=bucket,
        configurations=len(configs),
        best=best,
        runner_up=runner,
        margin=margin,
        within_noise=bool(
            best and runner and margin is not None and margin - 1.0 <= max(best.noise, runner.noise)
        ),
        best_sdpa=best_sdpa,
        pytorch_choice=choice,
        differs=bool(best_sdpa and choice and best_sdpa != choice),
        gain_over_pytorch=gain,
        gain_within_noise=gain_noisy,
        candidates=cands,
        rejected=dict(sorted(rejected.items())),
    )


def recommend(rows: Iterable[StoredResult]) -> list[Recommendation]:
    """One recommendation per bucket, in bucket order (device, dtype, ..., sequence length)."""
    groups: dict[Bucket, list[StoredResult]] = defaultdict(list)
    for r in rows:
        groups[_bucket(r)].append(r)
    return [_recommend_bucket(b, groups[b]) for b in sorted(groups)]


def build_policy(recs: Iterable[Recommendation], *, source: str = "") -> dict[str, Any]:
    """The policy file's content: one rule per bucket that has a correct SDPA backend."""
    rules = []
    for rec in recs:
        if rec.best_sdpa is None:
            continue
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
                "backend": rec.best_sdpa,
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
    }
