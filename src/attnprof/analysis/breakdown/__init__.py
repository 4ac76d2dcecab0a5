"""attnprof.analysis.breakdown: shares of the time by region, device category, model module, CPU op group and phase, and the kernel tables."""
