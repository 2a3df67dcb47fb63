"""The MQTT protocol: topics, the time format, the payload codec, canonical JSON, the link's state."""
