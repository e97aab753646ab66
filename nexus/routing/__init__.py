"""Routing: thread, session, persona and smart targets, all resolved to a thread head."""
