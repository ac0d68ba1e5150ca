"""pocketmem: long-term memory for LLM agents over the Model Context Protocol."""

__version__ = "0.1.0"
__all__ = ["__version__"]
