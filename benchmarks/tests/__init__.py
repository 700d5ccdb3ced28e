"""Tests of the benchmark infrastructure (the runner, the result files, the data loaders)."""
