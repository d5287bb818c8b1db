"""HA commands: the replicas of a broker name, their epoch, in-sync set and replication state (docs/ha.md)."""
