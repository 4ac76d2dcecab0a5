"""attnprof.analysis.records: the typed records (msgspec Structs) the analysis returns and the JSON contract is written from."""
