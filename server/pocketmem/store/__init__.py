"""Storage backends behind one interface: `Store` (base.py), its roles (roles.py) and value types (types.py);
SQLite (sqlite/) and PostgreSQL (postgres/), with the queries they share in sql/."""
