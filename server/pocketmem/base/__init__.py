"""Base layer: settings, errors, typed records, the clock. Imports nothing else of pocketmem."""
