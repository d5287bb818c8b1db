"""Broker transports for other frameworks (Celery/kombu)."""
