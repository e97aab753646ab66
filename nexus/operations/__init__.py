"""Running Nexus as processes: preflight checks, and what the process commands need."""
