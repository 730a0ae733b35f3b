"""The database: connections, transactions and what differs between SQLite and PostgreSQL
(``_database``), the tables (``_schema``), the schema's revisions (``_migrations``)."""
