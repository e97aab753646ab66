"""The agent engine: context assembly, the turn state machine, tools and compaction."""
