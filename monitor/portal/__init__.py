"""The web portal (`minewatch serve`): pages for the operator, the Town and its inspectors, a JSON API.

Only monitor.portal.data touches the rest of minewatch; see docs/PORTAL.md.
"""
