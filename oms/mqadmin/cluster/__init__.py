"""Cluster commands: ``clusterList``."""
