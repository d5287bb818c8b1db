"""Built-in plugins: filters, allocation strategies, ACL and the log appender."""
