"""Small shared utilities (atomic file output)."""
