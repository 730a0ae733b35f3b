"""The memory's schema revisions, oldest first (Alembic reads them; nothing imports them)."""
