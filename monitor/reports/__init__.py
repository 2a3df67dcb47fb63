"""Compliance reports: a site's period as the Town reads it (content.py: the figures from the
store, each with its source; formats.py: PDF and CSV), and sending it through the delivery
channels as a chained record (sending.py, which owns the ``reports`` table;
monitor/journal/report_files.py finds a recorded report's files through its row, for the delivery)."""
