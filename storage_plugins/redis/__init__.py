"""The Redis backend (``redis://``): options, key names, Lua scripts, storage."""
