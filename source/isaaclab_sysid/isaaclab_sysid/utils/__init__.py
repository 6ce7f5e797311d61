"""Small shared utilities: atomic file output, JSON-safe values and JSON reading."""
