"""Who may call what: TLS credentials, principals and grants, and the guard
that checks every Timeline call before its handler runs."""
