"""OpenMessaging-style Python client SDK for OrbitMQ (arrives with the oms issue)."""
