"""Embedders and chat models behind small interfaces."""
