"""Log analysis (documented below when complete)."""
