"""The broker's gRPC edge: the v2 MessagingService, the admin service and message conversion."""
