"""attnprof.analysis.perf: the per-op model: FLOPs and bytes from recorded op arguments, the roofline against the device's peaks."""
