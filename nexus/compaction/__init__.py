"""Compaction: when to summarise a session's older turns, the summary, and its commit."""
