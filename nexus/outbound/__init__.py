"""Outbound delivery: a committed reply becomes chunks, each sent to the platform it came from."""
