"""Index version 2: a heading vector per chunk, the repository's index version, and the lexical
statistics kept per repository.

Per repository, the statistics of one repository are recounted after its ingest (not the whole
corpus), and `/ask` can tell which words a repository contains. The corpus-wide figures BM25
uses are their sums. The plain tables of 0002 become models (deleted with their repository,
flushed with the rest); the statistics are recounted from the stored chunks.

Repositories indexed before this migration keep their chunks (and are served) until the next
ingest, or `manage.py reindex`, rebuilds them with the new recipe (index_version 0 != 2).
"""

import django.db.models.deletion
import pgvector.django
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("groundtruth", "0003_ingest_progress_and_counts"),
    ]

    operations = [
        migrations.AddField(
            model_name="chunk",
            name="heading_embedding",
            field=pgvector.django.VectorField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="repository",
            name="index_version",
            field=models.PositiveSmallIntegerField(
                default=0,
                help_text="recipe the chunks were indexed by (groundtruth/ingest/index_text.py); 0: never indexed",
            ),
        ),
        migrations.RunSQL(
            sql="DROP TABLE groundtruth_lexeme_statistic; DROP TABLE groundtruth_corpus_statistic;",
            reverse_sql="""
                CREATE TABLE groundtruth_lexeme_statistic (
                    lexeme text PRIMARY KEY,
                    document_count integer NOT NULL CHECK (document_count >= 0)
                );
                CREATE TABLE groundtruth_corpus_statistic (
                    id smallint PRIMARY KEY CHECK (id = 1),
                    document_count bigint NOT NULL CHECK (document_count >= 0),
                    total_length bigint NOT NULL CHECK (total_length >= 0),
                    refreshed_at timestamptz NOT NULL
                );
                INSERT INTO groundtruth_lexeme_statistic (lexeme, document_count)
                SELECT word, ndoc FROM ts_stat('SELECT search_vector FROM groundtruth_chunk WHERE search_vector IS NOT NULL');
                INSERT INTO groundtruth_corpus_statistic (id, document_count, total_length, refreshed_at)
                SELECT 1, count(*), coalesce(sum(lexeme_count), 0), now()
                FROM groundtruth_chunk WHERE search_vector IS NOT NULL;
            """,
        ),
        migrations.CreateModel(
            name="CorpusStatistic",
            fields=[
                (
                    "repository",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="+",
                        serialize=False,
                        to="groundtruth.repository",
                    ),
                ),
                ("document_count", models.PositiveBigIntegerField()),
                ("total_length", models.PositiveBigIntegerField()),
                ("refreshed_at", models.DateTimeField()),
            ],
            options={"db_table": "groundtruth_corpus_statistic"},
        ),
        migrations.CreateModel(
            name="LexemeStatistic",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("lexeme", models.TextField()),
                ("document_count", models.PositiveIntegerField()),
                (
                    "repository",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="+", to="groundtruth.repository"
                    ),
                ),
            ],
            options={
                "db_table": "groundtruth_lexeme_statistic",
                "indexes": [models.Index(fields=["lexeme"], name="lexeme_statistic_lexeme")],
                "constraints": [
                    models.UniqueConstraint(fields=("repository", "lexeme"), name="unique_repository_lexeme")
                ],
            },
        ),
        migrations.RunSQL(
            sql="""
                INSERT INTO groundtruth_lexeme_statistic (repository_id, lexeme, document_count)
                SELECT repository.id, statistic.word, statistic.ndoc
                FROM groundtruth_repository AS repository
                CROSS JOIN LATERAL ts_stat(format(
                    'SELECT search_vector FROM groundtruth_chunk WHERE repository_id = %s AND search_vector IS NOT NULL',
                    repository.id
                )) AS statistic;
                INSERT INTO groundtruth_corpus_statistic (repository_id, document_count, total_length, refreshed_at)
                SELECT repository_id, count(*), coalesce(sum(lexeme_count), 0), now()
                FROM groundtruth_chunk WHERE search_vector IS NOT NULL GROUP BY repository_id;
            """,
            reverse_sql=migrations.RunSQL.noop,
        ),
    ]
