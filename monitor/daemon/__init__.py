"""The daemon: ingest, the pipeline, workers, minute closing, per-site state, health, status."""
