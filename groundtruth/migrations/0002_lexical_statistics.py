"""Corpus term statistics for BM25 (groundtruth/search/lexical_index.py).

Plain tables without Django models: only the lexical index writes them (with set-based SQL)
and only the lexical search reads them.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("groundtruth", "0001_initial"),
    ]

    operations = [
        migrations.RunSQL(
            sql="""
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
            """,
            reverse_sql="""
                DROP TABLE groundtruth_corpus_statistic;
                DROP TABLE groundtruth_lexeme_statistic;
            """,
        ),
    ]
