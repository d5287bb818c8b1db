"""The internal v2 client core shared by OMS producers and consumers (not a public API).

One job per module: loop thread, identities, headers, channels, RPC/status mapping, routes, telemetry, lifecycle.
"""
