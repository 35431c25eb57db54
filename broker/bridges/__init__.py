"""Bridges run by the broker (``--bridges FILE``), and what the console shows of them."""
