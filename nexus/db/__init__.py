"""Database access: the `Database` (its connections made on first use), units of work, and
migrations."""

from nexus.db.database import Database, normalize_database_url
from nexus.db.unit_of_work import UnitOfWork

__all__ = ["Database", "UnitOfWork", "normalize_database_url"]
