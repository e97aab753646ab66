"""Database access: engines built on demand, units of work, and migrations."""

from nexus.db.engine import Database, normalize_database_url
from nexus.db.unit_of_work import UnitOfWork

__all__ = ["Database", "UnitOfWork", "normalize_database_url"]
