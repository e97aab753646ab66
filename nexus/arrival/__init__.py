"""The one way in: every input, whatever door it came by, queued under the same rules."""
