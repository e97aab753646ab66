"""The Anthropic Messages API behind the engine's model port."""
