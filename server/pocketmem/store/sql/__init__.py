"""SQL written once for both backends: a small dialect and the portable queries that use it."""
