"""Local fake provider servers (127.0.0.1, random free port) for tests and benchmarks."""
