"""Name-server commands: KV config, name-server config, and a broker's write permission in the routes."""
