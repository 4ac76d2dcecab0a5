"""What the device's synchronisation records (Kineto's "cuda_sync" events) say a wait was on.

CUPTI records each synchronisation as an event on the lane of the stream it concerns, with the
correlation of the runtime call that made it: "Stream Wait Event" (cudaStreamWaitEvent: the
stream waits on an event recorded on `wait_on_stream`, by the cudaEventRecord whose correlation
is `wait_on_cuda_event_record_corr_id`), "Event Sync" (cudaEventSynchronize: the host waits on
such an event), "Stream Sync" (cudaStreamSynchronize: the host waits on the record's stream) and
"Context Sync" (cudaDeviceSynchronize: every stream). Trace.sync_waits holds the two wait_on
arguments per record (-1 where CUPTI did not say).

The work a wait depends on is the device ops of the waited-on stream launched before the event
was recorded (for an event), or before the sync call (for a stream): launches take increasing
correlation ids, so "before" is a smaller correlation. Two facts come from it, both read by
attnprof.analysis.timeline.idle:

- waited_end: for a host sync call with a record, when the recorded work it waited on ended.
  A call that returns UNRECORDED_WAIT_US or more after that waited on work the trace does not
  contain, even when another stream was busy meanwhile (which the device-wide rule cannot tell);
- held_streams: for a stream wait, the time the waiting stream's next op was held although it was
  queued (its launch call had returned), the stream's previous op and every recorded op it waited
  on had ended: what held it is work the trace does not contain (a producer stream's work from
  before the profiler started, or not captured). Only holds of UNRECORDED_WAIT_US or more count:
  a queued op starts microseconds after what it waits on.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from attnprof.analysis.attribution.links import Links
from attnprof.trace.model import Kind, Trace

__all__ = ["StreamWaits", "stream_waits"]

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

_EVENT_WAITS = ("Stream Wait Event", "Event Sync")


class StreamWaits:
    """The synchronisation records of one trace, indexed for the idle analysis."""

    def __init__(self, trace: Trace, links: Links, ends: F64, hold_min_us: float) -> None:
        """ends: per device op (Links.gpu_rows), the end busy time uses."""
        self.trace, self.links, self.ends, self.hold_min_us = trace, links, ends, hold_min_us
        self.rows = trace.rows(Kind.SYNC)
        # lane id by (pid, tid) as the loader wrote them (strings)
        self._lane_of = {lane: i for i, lane in enumerate(trace.lanes)}
        # per lane, its device ops by correlation (launch order), with the running maximum of
        # their ends: "the work launched before correlation c" is one binary search. Built only
        # when there are records to read.
        self._by_lane: dict[int, tuple[I64, I64, F64]] = {}
        if self.rows.size:
            g = links.gpu_rows
            has = np.flatnonzero(trace.corr[g] >= 0)
            order = has[np.lexsort((trace.corr[g][has], trace.lane[g][has]))]
            lanes = trace.lane[g][order]
            cuts = np.flatnonzero(np.diff(lanes)) + 1
            for part in np.split(order, cuts):
                if part.size:
                    reach = np.maximum.accumulate(ends[part].astype(np.float64))
                    self._by_lane[int(trace.lane[g][part[0]])] = (
                        part,
                        trace.corr[g][part].astype(np.int64),
                        reach,
                    )

    @property
    def recorded(self) -> bool:
        return bool(self.rows.size)

    def _waited(self, rec: int) -> tuple[int, int] | None:
        """(lane of the waited-on stream, correlation cut-off: ops launched before it), or None
        where the record does not say (a Context Sync waits on every stream)."""
        t = self.trace
        name = t.names[int(t.name[rec])]
        pid = t.lanes[int(t.lane[rec])][0]
        if name in _EVENT_WAITS:
            stream, record_corr = t.sync_waits.get(rec, (-1, -1))
            if stream < 0 or record_corr < 0:
                return None
            lane = self._lane_of.get((pid, str(stream)), -1)
            return lane, record_corr
        if name == "Stream Sync":
            return int(t.lane[rec]), int(t.corr[rec])
        return None

    def _end_before(self, lane: int, corr: int) -> float:
        """When the lane's device ops launched before correlation `corr` had all ended (-inf:
        none recorded)."""
        got = self._by_lane.get(lane)
        if got is None:
            return -np.inf
        i = int(np.searchsorted(got[1], corr, "left"))
        return float(got[2][i - 1]) if i > 0 else -np.inf

    def _first_after(self, lane: int, corr: int) -> int:
        """The lane's first device op (index into Links.gpu_rows) launched after `corr`; -1: none."""
        got = self._by_lane.get(lane)
        if got is None:
            return -1
        i = int(np.searchsorted(got[1], corr, "right"))
        return int(got[0][i]) if i < got[0].size else -1

    def waited_end(self, calls: I64) -> F64:
        """Per host sync call: when the recorded work its record says it waited on ended
        (-inf: that stream had none recorded); NaN where no record says what it waited on."""
        t = self.trace
        out = np.full(calls.size, np.nan)
        if not self.recorded or calls.size == 0:
            return out
        by_corr: dict[int, int] = {}
        for r in self.rows.tolist():
            by_corr.setdefault(int(t.corr[r]), r)
        for i, c in enumerate(t.corr[calls].tolist()):
            rec = by_corr.get(int(c)) if c >= 0 else None
            what = self._waited(rec) if rec is not None else None
            if what is None:
                continue
            lane, cut = what
            out[i] = self._end_before(lane, cut)
        return out

    def held_streams(self) -> tuple[F64, F64, I64, dict[str, float]]:
        """The holds of streams by waits on unrecorded work (see the module's text): (start,
        end, cuda_sync row) per hold, and the held time per waited-on stream ("stream N").

        Every wait queued on a stream before its next op holds that op: the op is ready when
        all of them (and the stream's own earlier ops) are, so the waits before one op are
        judged together, and not at all when one of them does not say what it waited on."""
        t, links = self.trace, self.links
        # the first op queued after each wait -> the waits before it: (row, ready, stream waited on)
        before: dict[int, list[tuple[int, float, int]]] = {}
        unknown: set[int] = set()
        for rec in self.rows.tolist():
            if t.names[int(t.name[rec])] != "Stream Wait Event":
                continue
            wait_corr = int(t.corr[rec])
            own = int(t.lane[rec])
            nxt = self._first_after(own, wait_corr) if wait_corr >= 0 else -1
            if nxt < 0:
                continue
            what = self._waited(rec)
            if what is None:
                unknown.add(nxt)
                continue
            lane, cut = what
            ready = max(self._end_before(own, wait_corr), self._end_before(lane, cut))
            before.setdefault(nxt, []).append((rec, ready, t.sync_waits.get(rec, (-1, -1))[0]))
        starts: list[float] = []
        stops: list[float] = []
        recs: list[int] = []
        by_stream: dict[str, float] = {}
        for nxt, waits in before.items():
            launch = int(links.launch[nxt])
            if nxt in unknown or launch < 0:
                continue  # a wait that does not say on what, or an op queued when is not recorded
            ready = max(float(t.ts[launch] + t.dur[launch]), *(r for _, r, _ in waits))
            start = float(t.ts[links.gpu_rows[nxt]])
            if start - ready >= self.hold_min_us:
                starts.append(ready)
                stops.append(start)
                recs.append(waits[-1][0])
                key = ", ".join(sorted({f"stream {w}" for _, _, w in waits}))
                by_stream[key] = round(by_stream.get(key, 0.0) + start - ready, 3)
        return (
            np.array(starts, np.float64),
            np.array(stops, np.float64),
            np.array(recs, np.int64),
            by_stream,
        )


def stream_waits(trace: Trace, links: Links, ends: F64, hold_min_us: float) -> StreamWaits:
    return StreamWaits(trace, links, ends, hold_min_us)
