"""Nexus: a durable, horizontally scalable agent broker."""

__version__ = "0.1.0"
