"""Helpers for tests, benchmarks and notebooks."""
