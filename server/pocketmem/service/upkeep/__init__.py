"""Keeping a store healthy over time: maintenance runs, review of used and decayed memories, todos, the doctor."""
