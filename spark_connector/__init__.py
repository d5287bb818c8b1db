"""PySpark Python Data Source for OrbitMQ (arrives with the Spark issue)."""
