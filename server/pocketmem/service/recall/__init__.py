"""recall_memories: candidates, the relevance decision, the current fact (versions), degradation and the
cloud library."""
