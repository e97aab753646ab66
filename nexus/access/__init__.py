"""Access: who is speaking, whether they may, and which session and persona answer."""
