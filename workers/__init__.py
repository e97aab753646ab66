"""Celery app factory and thin tasks: ids in, a unit of work, the core, commit."""
