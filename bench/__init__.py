"""Benchmarks: figures are ratios against a baseline measured in the same run."""
