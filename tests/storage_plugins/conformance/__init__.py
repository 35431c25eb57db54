"""The storage contract (storage_plugins/base.py), checked against every backend.

Time is a parameter of storage, never a clock: each story moves time by
passing a later ``now``.
"""
