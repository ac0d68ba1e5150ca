"""recall_memories: candidates, the relevance decision, the current fact, topics, degradation and the
cloud library."""
