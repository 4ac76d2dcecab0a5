"""attnprof.analysis.ranks: folders of per-rank traces: rank naming, the per-rank cache, collectives, bus bandwidth, Ray-parallel reading."""
