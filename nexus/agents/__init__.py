"""Manager and worker agents: dispatch, messages between sessions, results that come back."""
