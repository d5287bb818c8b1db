"""Master/slave replication (RocketMQ's HA): CommitLog streaming, SYNC_MASTER acknowledgement, SlaveSynchronize.

``replication.build_replication`` gives the controller the part its ``brokerRole`` needs; docs/ha.md explains it.
"""
