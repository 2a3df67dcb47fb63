"""Blasting seismographs (SPS 307, 30 CFR 816.67): event waveforms in, the event's summary out.

Pure like monitor/acoustics: arrays in, peaks out (``summary``); vendors' event files read into
the same arrays (``vendor_csv``). The daemon recomputes what the edge sent with the same code.
"""
