"""The PostgreSQL backend (``postgresql://``): options, SQL, migrations, storage."""
