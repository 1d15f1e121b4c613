"""Sink: stage records as Parquet shards, then commit them as one DuckLake snapshot."""
