"""The profile layer: persona and identity, the Markdown files, Project.md's summary, the context package."""
