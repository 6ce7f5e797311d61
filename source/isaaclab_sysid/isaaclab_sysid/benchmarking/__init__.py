"""Benchmarks against peer tools on the project's twins (benchmarks/vs_peers.py, docs/benchmarks.md)."""
