"""The per-session run: lease, claim (epoch + 1), turns per queue mode, release."""
