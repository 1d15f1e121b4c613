"""The stream job's pure parts: pluggable landing sources and fixed windows."""
