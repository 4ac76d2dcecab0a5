"""attnprof.analysis.replay: CUDA graph replays attributed to the capture that recorded them, and torch.compile regions."""
