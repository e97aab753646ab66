"""The beat schedule (data) that drives the 60-second timer."""
