from django.db import migrations

MISSING_PGVECTOR = (
    "The PostgreSQL server at DATABASE_URL has no 'vector' extension (pgvector). Install "
    "pgvector 0.8+ on that server (e.g. the postgresql-<version>-pgvector package) or unset "
    "DATABASE_URL to use the embedded PostgreSQL with pgvector under var/."
)


def enable_pgvector(apps, schema_editor) -> None:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        if cursor.fetchone() is None:
            raise RuntimeError(MISSING_PGVECTOR)
        cursor.execute("CREATE EXTENSION IF NOT EXISTS vector")


class Migration(migrations.Migration):
    initial = True
    dependencies: list = []
    operations = [migrations.RunPython(enable_pgvector, migrations.RunPython.noop)]
