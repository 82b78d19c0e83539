"""Renderers: one module per output format (text, json, markdown), all from the same results."""
