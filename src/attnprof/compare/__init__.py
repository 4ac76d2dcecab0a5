"""Comparison of runs and traces, between analysis and report: `compare` builds one Row per
variant or trace and the speed ratios against a baseline, `diff` sets two rows' kernels side by
side, `expect` checks a comparison against the expectations of docs/expectations.md.

The package reads records (run.json) and the analysis's TraceAnalysis; it never imports the
harness, torch or report (docs/architecture.md)."""
