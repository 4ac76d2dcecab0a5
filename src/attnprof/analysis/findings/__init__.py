"""attnprof.analysis.findings: the rules that turn an analysis into findings, their codes, context and the materiality bar each must clear."""
