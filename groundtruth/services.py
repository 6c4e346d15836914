"""Writes of the ground-truth app: loading the source registry into Repository rows, ingest
requests, the beat schedule and re-embedding.

An ingest run's own transitions (claim, heartbeat, succeed, fail, requeue, stale clearing) are
`groundtruth.ingest.runs`; the ingest itself is `groundtruth.ingest.pipeline.ingest_run_execute`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence

from celery import current_app
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from agentplatform.plumbing.errors import Conflict, NotFound, ServiceUnavailable
from agentplatform.plumbing.server_paths import server_paths_hidden
from groundtruth.embeddings import EmbeddingBackend, EmbeddingsDisabled, embedding_backend
from groundtruth.ingest.git_access import GitError, GitNetworkError, registry_repository
from groundtruth.ingest.index_lock import repository_index_lock
from groundtruth.ingest.index_text import heading_text, passage_text
from groundtruth.ingest.runs import RunRequest, ingest_run_request, ingest_runs_enqueue
from groundtruth.ingest.source_policy import SourceRefused, source_location, url_without_credentials
from groundtruth.models import Chunk, IngestRun, IngestTrigger, Registry, Repository
from groundtruth.registry import SourceRegistry, registry_parse
from groundtruth.registry_files import RegistryInvalid, registry_base_dir, registry_location
from groundtruth.signals import ingest_queued

logger = logging.getLogger(__name__)

INGEST_ALL_TASK_NAME = "groundtruth: re-ingest every enabled repository"
STALE_CLEAR_TASK_NAME = "groundtruth: clear stale ingest runs"
ASKED_QUESTIONS_PURGE_TASK_NAME = "groundtruth: purge the audit of questions past its retention"
BEAT_TASK_KWARGS = {"trigger": IngestTrigger.BEAT.value}
REGISTRY_SYNC_TASK = "groundtruth.tasks.registry_sync_task"


def registry_load() -> tuple[Registry, SourceRegistry]:
    """Re-reads sources.yml from the registry repository and syncs the Repository rows.

    On success the Registry row keeps the new content and commit, every listed repository is
    created or updated, and repositories no longer listed are disabled (their index stays).
    On failure (invalid file, missing file or ref) the error is recorded on the Registry row,
    the last good registry and the Repository rows are left as they were, and RegistryInvalid is
    raised. GitNetworkError passes through unchanged so callers can retry.
    """
    location = registry_location(settings.SOURCE_REGISTRY_PATH)
    registry_row, _ = Registry.objects.get_or_create(location=location)
    filename = settings.SOURCE_REGISTRY_PATH
    repository = registry_repository()
    try:
        try:
            source_location(settings.SOURCE_REGISTRY_REPO)
        except SourceRefused as exc:
            raise RegistryInvalid([f"SOURCE_REGISTRY_REPO: {exc}"]) from exc
        repository.fetch()
        commit = repository.resolve(settings.SOURCE_REGISTRY_REF)
        try:
            content = repository.read_file(commit, filename)
        except GitError as exc:
            problem = f"{filename}: not found at commit {commit[:12]} of the registry repository"
            raise RegistryInvalid([problem]) from exc
        parsed = registry_parse(content=content, filename=filename, base_dir=registry_base_dir())
    except RegistryInvalid as exc:
        _registry_error_record(registry_row, "\n".join(exc.errors))
        raise
    except GitError as exc:
        if exc.__class__ is GitError:  # terminal: the repository or ref is missing
            _registry_error_record(registry_row, str(exc))
            raise RegistryInvalid([f"{url_without_credentials(settings.SOURCE_REGISTRY_REPO)}: {exc}"]) from exc
        _registry_error_record(registry_row, str(exc))
        raise
    with transaction.atomic():
        Registry.objects.filter(pk=registry_row.pk).update(
            commit=commit,
            content=content.decode("utf-8"),
            loaded_at=timezone.now(),
            last_error="",
            last_error_at=None,
        )
        registry_repositories_sync(registry=registry_row, parsed=parsed)
    registry_row.refresh_from_db()
    return registry_row, parsed


def _registry_error_record(registry_row: Registry, error: str) -> None:
    Registry.objects.filter(pk=registry_row.pk).update(
        last_error=server_paths_hidden(error), last_error_at=timezone.now()
    )


def registry_repositories_sync(*, registry: Registry, parsed: SourceRegistry) -> None:
    """Upserts one Repository row per listed repo; repos no longer listed are disabled.

    Takes no row lock beyond the UPDATE's own (not `update_or_create`'s SELECT ... FOR UPDATE,
    which conflicts with the key-share locks a running ingest holds on its repository's row for
    its whole transaction), and writes only the rows whose registry fields changed: a request
    that re-reads the registry never waits for a running ingest."""
    listed = set()
    now = timezone.now()
    stored = {row["name"]: row for row in Repository.objects.values("name", "registry_id", *_REGISTRY_FIELDS)}
    for spec in parsed.repositories:
        listed.add(spec.name)
        values: dict[str, object] = {
            "url": spec.url,
            "ref": spec.ref,
            "trust": spec.trust,
            "owners": list(spec.owners),
            "include": list(spec.include),
            "exclude": list(spec.exclude),
            "enabled": spec.enabled,
            "is_transcript": spec.is_transcript,
        }
        row = stored.get(spec.name)
        if row is not None and row["registry_id"] == registry.pk and all(row[k] == v for k, v in values.items()):
            continue
        if Repository.objects.filter(name=spec.name).update(registry=registry, updated_at=now, **values):
            continue
        try:
            with transaction.atomic():
                Repository.objects.create(name=spec.name, registry=registry, **values)
        except IntegrityError:  # a concurrent re-read created it between our update and insert
            Repository.objects.filter(name=spec.name).update(registry=registry, updated_at=now, **values)
    Repository.objects.exclude(name__in=listed).filter(enabled=True).update(enabled=False, updated_at=now)


_REGISTRY_FIELDS = ("url", "ref", "trust", "owners", "include", "exclude", "enabled", "is_transcript")


def ingest_request(
    *,
    repository_name: str | None,
    ref: str | None,
    trigger: str,
    enqueue: bool = True,
    visible: QuerySet[Repository] | None = None,
) -> list[RunRequest]:
    """Requests a run of one repository (or of every enabled one) of `visible` (all when None;
    another is "not listed", as far as the caller can tell), deciding from the registry as last
    synced into PostgreSQL, and enqueues the created runs once their transaction commits (and
    sends `ingest_queued`). Call it outside a transaction.

    It reads no git: a web host holds no git token, egress or cache (docs/deployment.md). The
    worker re-reads sources.yml before it ingests (`groundtruth.ingest.pipeline`), so a
    repository removed, disabled or changed since the last sync fails its run with the reason.
    Callers that run where the registry can be read and want it fresh (commands, the beat's
    re-ingest) call `registry_reload` first.

    Raises Conflict when the repository is disabled, NotFound when it is not listed (or not yet
    synced: a repository added to sources.yml is known once a worker has re-read it).
    """
    repositories_seen = visible if visible is not None else Repository.objects.all()
    if repository_name:
        repository = repositories_seen.filter(name=repository_name).first()
        if repository is None:
            raise NotFound(_not_listed_detail(repository_name))
        if not repository.enabled:
            raise Conflict(f"Repository {repository_name!r} is disabled in the source registry.", code="disabled")
        repositories = [repository]
    else:
        repositories = list(repositories_seen.filter(enabled=True).order_by("name"))
    return ingest_runs_request(repositories=repositories, ref=ref, trigger=trigger, enqueue=enqueue)


def _not_listed_detail(repository_name: str) -> str:
    # A 404, not a run queued for a name nobody knows yet: an unknown name changes nothing (it
    # may be a typo or out of the key's scope, and the answer must not tell which), and a
    # repository added to sources.yml is known as soon as a worker re-reads it (a push to the
    # registry repository, any ingest, the scheduled re-ingest, `manage.py ingest`).
    synced = Registry.objects.filter(
        location=registry_location(settings.SOURCE_REGISTRY_PATH), loaded_at__isnull=False
    ).first()
    when = (
        f"last synced by a worker at {synced.loaded_at.isoformat(timespec='seconds')} (commit {synced.commit[:12]})"
        if synced is not None and synced.loaded_at is not None
        else "not yet synced by a worker"
    )
    return (
        f"Repository {repository_name!r} is not listed in the source registry ({when}; the workers re-read "
        "sources.yml on a push to the registry repository and before every ingest)."
    )


def registry_sync_enqueue() -> None:
    """Asks a worker to re-read sources.yml (`groundtruth.tasks.registry_sync_task`) once the
    current transaction commits: a web host never reads the registry repository itself."""
    transaction.on_commit(
        lambda: current_app.signature(REGISTRY_SYNC_TASK, queue=settings.CELERY_TASK_DEFAULT_QUEUE).apply_async()
    )


def registry_reload() -> Registry:
    """`registry_load` where git is at hand (a worker, a command): an invalid registry is a
    Conflict listing its errors, an unreachable one ServiceUnavailable. Commits on its own (the
    error record must survive the refusal)."""
    try:
        registry_row, _ = registry_load()
    except RegistryInvalid as exc:
        raise Conflict(
            "The source registry is invalid; the last good registry and the indexed data stay served.",
            code="registry_invalid",
            errors=[{"field": settings.SOURCE_REGISTRY_PATH, "message": error} for error in exc.errors],
        ) from exc
    except GitNetworkError as exc:
        raise ServiceUnavailable(f"The registry repository cannot be reached: {exc}") from exc
    return registry_row


def ingest_runs_request(
    *, repositories: list[Repository], ref: str | None, trigger: str, enqueue: bool = True
) -> list[RunRequest]:
    """Requests a run of each repository (its active run, or a new one); the created runs are
    enqueued, and `ingest_queued` sent, when they commit."""
    with transaction.atomic():
        requests = [ingest_run_request(repository=repository, ref=ref, trigger=trigger) for repository in repositories]
        created = [request.run for request in requests if request.created]
        if enqueue and created:
            ingest_runs_enqueue(runs=created)
            # Other files of the registry repository (brand-assets.yml) are synced by their apps.
            ingest_queued.send(sender=IngestRun, runs=created)
    return requests


def ingest_schedule_sync() -> None:
    """Creates or updates the beat PeriodicTasks from INGEST_SCHEDULE (startup step).

    Called after every `migrate` (post_migrate) and when beat starts (beat_init). The re-ingest
    task gets the crontab of INGEST_SCHEDULE; "off" disables it. An edit made in the admin wins:
    the task's description records the schedule this function last applied, and the crontab is
    only replaced while it still equals that value (so changing INGEST_SCHEDULE moves a schedule
    nobody edited, and never overwrites one a staff member changed). The stale-run sweep runs
    every minute, the purge of the audit of questions daily.
    """
    from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

    configured = settings.INGEST_SCHEDULE
    marker = f"managed by INGEST_SCHEDULE; last applied: {configured}"
    task = PeriodicTask.objects.filter(name=INGEST_ALL_TASK_NAME).select_related("crontab").first()
    if configured != "off":
        minute, hour, day_of_month, month, day_of_week = configured.split()
        crontab, _ = CrontabSchedule.objects.get_or_create(
            minute=minute,
            hour=hour,
            day_of_month=day_of_month,
            month_of_year=month,
            day_of_week=day_of_week,
            timezone="UTC",
        )
    if task is None:
        if configured != "off":
            PeriodicTask.objects.create(
                name=INGEST_ALL_TASK_NAME,
                task="groundtruth.tasks.ingest_all",
                crontab=crontab,
                kwargs=json.dumps(BEAT_TASK_KWARGS),
                description=marker,
            )
    else:
        if task.kwargs == json.dumps({"trigger": "schedule"}):
            # Written before the trigger was named "beat"; kwargs a staff member edited are theirs.
            task.kwargs = json.dumps(BEAT_TASK_KWARGS)
            PeriodicTask.objects.filter(pk=task.pk).update(kwargs=task.kwargs)
        last_applied = task.description.removeprefix("managed by INGEST_SCHEDULE; last applied: ")
        current = task.crontab and " ".join(
            [
                task.crontab.minute,
                task.crontab.hour,
                task.crontab.day_of_month,
                task.crontab.month_of_year,
                task.crontab.day_of_week,
            ]
        )
        untouched = task.description.startswith("managed by INGEST_SCHEDULE") and (
            current == last_applied or (last_applied == "off" and not task.enabled)
        )
        if untouched and last_applied != configured:
            if configured == "off":
                task.enabled = False
            else:
                task.crontab = crontab
                task.interval = None
                task.enabled = True
            task.description = marker
            task.save()
    interval, _ = IntervalSchedule.objects.get_or_create(every=60, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.get_or_create(
        name=STALE_CLEAR_TASK_NAME,
        defaults={"task": "groundtruth.tasks.ingest_runs_stale_clear_task", "interval": interval},
    )
    daily, _ = IntervalSchedule.objects.get_or_create(every=1, period=IntervalSchedule.DAYS)
    PeriodicTask.objects.get_or_create(
        name=ASKED_QUESTIONS_PURGE_TASK_NAME,
        defaults={"task": "groundtruth.tasks.asked_questions_purge_task", "interval": daily},
    )


def chunk_vectors_embed(
    *, backend: EmbeddingBackend, chunks: Sequence[Chunk], repository_name: str
) -> list[tuple[list[float], list[float] | None]]:
    """(passage vector, title vector or None) of each chunk of one repository, as an ingest embeds
    them: each distinct passage and title embedded once, in one call."""
    texts: dict[str, str] = {}
    titles: set[str] = set()
    for chunk in chunks:
        heading = [str(part) for part in chunk.heading or []]
        passage = passage_text(repository_name=repository_name, heading=heading, text=chunk.text)
        texts.setdefault(chunk.content_hash, passage)
        if title := heading_text(heading):
            titles.add(title)
    ordered_titles = sorted(titles)
    embedded_vectors = backend.embed([*texts.values(), *ordered_titles])
    vectors = dict(zip(texts, embedded_vectors[: len(texts)], strict=True))
    title_vectors = dict(zip(ordered_titles, embedded_vectors[len(texts) :], strict=True))
    embedded = []
    for chunk in chunks:
        title = heading_text([str(part) for part in chunk.heading or []])
        embedded.append((vectors[chunk.content_hash], title_vectors[title] if title else None))
    return embedded


def repository_reembed(
    *, repository: Repository, progress: Callable[[int, int], None] | None = None, batch_size: int = 512
) -> int:
    """Re-embeds every chunk of `repository` whose vectors are missing or were made by another
    model or dimension than the configured backend's; returns how many were embedded.

    One transaction per repository (holding its index lock, so an ingest of it waits):
    readers keep the old vectors until it commits. Run `manage.py reembed` after changing
    EMBEDDING_BACKEND or EMBEDDING_MODEL; ingests refuse to mix models until it has run.
    """
    backend = embedding_backend()
    if not backend.enabled:
        raise EmbeddingsDisabled("EMBEDDING_BACKEND=none: there is no model to re-embed with")
    model, dimension = backend.model_name, backend.dimension
    embedded = 0
    with transaction.atomic():
        repository_index_lock(repository_id=repository.pk)
        stale = (
            Chunk.objects.filter(repository=repository)
            .extra(
                where=[
                    "(embedding IS NULL OR embedding_model <> %s OR vector_dims(embedding) <> %s"
                    " OR (heading_embedding IS NULL AND jsonb_array_length(heading) > 0))"
                ],
                params=[model, dimension],
            )
            .order_by("id")
        )
        ids = list(stale.values_list("id", flat=True))
        for start in range(0, len(ids), batch_size):
            chunks = list(Chunk.objects.filter(id__in=ids[start : start + batch_size]).order_by("id"))
            vectors = chunk_vectors_embed(backend=backend, chunks=chunks, repository_name=repository.name)
            for chunk, (vector, title_vector) in zip(chunks, vectors, strict=True):
                chunk.embedding = vector
                chunk.heading_embedding = title_vector
                chunk.embedding_model = model
            Chunk.objects.bulk_update(chunks, ["embedding", "heading_embedding", "embedding_model"], batch_size=500)
            embedded += len(chunks)
            if progress:
                progress(embedded, len(ids))
    return embedded
