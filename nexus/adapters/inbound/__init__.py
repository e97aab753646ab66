"""Inbound adapters: verify a platform's request on its raw bytes, then parse it to events."""
