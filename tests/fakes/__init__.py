"""Loopback fakes of outside services, reached by the real client libraries."""
