"""The PostgreSQL backend (psycopg 3, pgvector)."""
