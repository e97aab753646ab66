"""Per-session queueing: what runs next by queue mode, caps, locks and the session run."""
