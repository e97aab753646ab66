"""Turns: the turn service (read, assemble, run the model loop, commit) and its commit."""
