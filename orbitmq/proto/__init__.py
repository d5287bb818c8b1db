"""Internal protocols (name server registration, admin) and their generated modules."""
