"""The agent engine: context assembly, the turn service and its state machine, tools."""
