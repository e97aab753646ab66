"""Per-session queueing: what runs next by queue mode, caps and overflow, the coordination port."""
