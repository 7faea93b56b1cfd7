"""Renderers of plain-data results: terminal and JSON here; batch formats beside them."""
