"""Ingest: detect a landing file's format, parse it into drafts, reject bad records."""
