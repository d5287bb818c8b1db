"""The OrbitMQ name server: broker registration, expiry and topic routes."""
