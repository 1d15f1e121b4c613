"""Format readers (one module per source format) and auto-detection. See README."""
