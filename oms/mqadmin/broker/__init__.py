"""Broker commands: a broker's configuration, its groups' consumption, and send round trips to it."""
