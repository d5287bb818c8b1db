"""Reproducible benchmarks; ``make bench`` runs them and writes JSON under ``benchmarks/results/``."""
