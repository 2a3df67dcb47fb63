"""Residents' complaints: received on the portal's public page, chained, checked against the
record at once (check.py, deciding with rules/complaints.py), triaged by the Town and attached
to notices (book.py, which owns the ``complaints`` and ``complaint_changes`` tables)."""
