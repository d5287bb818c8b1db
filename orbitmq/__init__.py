"""Pieces shared by the servers and the clients: config loading, limits, codes and protocol glue."""
