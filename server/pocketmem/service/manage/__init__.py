"""What a person manages by hand: the management page's lists and edits, list_memories, API tokens,
and the looks the CLI shows before a destructive step."""
