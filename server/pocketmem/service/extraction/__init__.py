"""remember_conversation: a chat model's operations, checked and applied through the write path."""
