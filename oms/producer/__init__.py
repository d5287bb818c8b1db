"""The OMS producer: sync/async/oneway/batch/ordered/transactional sends over the v2 protocol.

``Producer`` is created by ``MessagingAccessPoint.create_producer``; the other modules are its parts.
"""
