"""The lock that serialises the writers of one repository's index (the ingest's swap
transaction and `repository_reembed`).

A PostgreSQL transaction-level advisory lock keyed by the repository's id, not a row lock on
the Repository row: an ingest holds it for its whole chunk-and-embed transaction (minutes), and
a row lock would make everything that writes the row meanwhile wait as long — the registry
re-read of every POST /ingest/repo and push among them. The advisory lock is released when the
transaction ends, so a worker that dies mid-run releases it with its connection.
"""

from __future__ import annotations

from django.db import connection

# The first half of the two-key advisory lock: the namespace of these locks, so that they never
# collide with another feature's advisory locks on the same ids.
_NAMESPACE = "groundtruth.repository_index"


def repository_index_lock(*, repository_id: int) -> None:
    """Waits for, then holds until the current transaction ends, the index lock of a repository.
    Call it inside `transaction.atomic()`."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(hashtext(%s), %s)", [_NAMESPACE, repository_id])
