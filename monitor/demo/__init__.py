"""`minewatch demo`: a simulated site, a real broker, the daemon, notices and evidence."""
