"""Versioned evidence: documents and tool artifacts as section-aware chunks with
embeddings (pure logic here; ``transforms.py`` is the Beam wrapper)."""
