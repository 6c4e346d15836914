"""What the ground-truth app tells the apps that follow it, without importing them.

The registry repository that every ingest re-reads holds more than sources.yml
(brand-assets.yml, for one): an app that reads such a file connects to these signals in its
AppConfig.ready and syncs its part.
"""

from django.dispatch import Signal

ingest_queued = Signal()
"""Sent by `ingest_request` (sender: IngestRun, `runs`: the runs it created) inside the
transaction that queues new runs for the worker (on a web host: no git was read; the worker
re-reads the registry). Receivers queue their own follow-up work with `transaction.on_commit`,
on a worker."""

ingest_command_finished = Signal()
"""Sent by `manage.py ingest` after its runs, in the same process. Each receiver does its
follow-up work now and returns a report with `ok` and `lines()`, which the command prints."""

registry_pushed = Signal()
"""Sent by a push to the registry repository (POST /hooks/git, sender: Registry), which queues
the re-read of sources.yml on a worker, when the push queued no ingest run (then `ingest_queued`
is sent instead). Receivers that read another file of the registry repository queue its re-read
on a worker with `transaction.on_commit` (the web host reads no git)."""
