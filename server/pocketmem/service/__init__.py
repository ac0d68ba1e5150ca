"""Services: the write path, recall, trash, pending, maintenance, export, sync, tokens."""
