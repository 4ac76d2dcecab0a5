"""attnprof.analysis.timeline: time on the device and host: intervals, idle and its causes, runtime calls, stream waits, overlap, sanitising of bad timestamps."""
