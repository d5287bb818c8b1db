"""Offset commands: ``consumerProgress``, ``resetOffsetByTime``."""
