"""InfluxDB output: the schema, points, the durable outbox and the v1/v2 client."""
