"""Pure policy: scoring, ranking, text, formatting, privacy patterns. No I/O, no store."""
