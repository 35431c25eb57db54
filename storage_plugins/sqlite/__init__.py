"""The SQLite backend (``sqlite:///path``): options, SQL, writer thread, storage."""
