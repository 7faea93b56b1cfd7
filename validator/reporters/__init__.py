"""Renderers of plain-data results: terminal, JSON and HTML here, batch formats beside them.

``figures`` draws the figures a check carries (an init histogram) as text for every text reporter.
"""
