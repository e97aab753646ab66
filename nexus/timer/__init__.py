"""The 60-second timer: one event per minute, exactly once, whoever ticks."""
