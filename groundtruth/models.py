from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.db.models import Q
from pgvector.django import VectorField


class TrustTier(models.TextChoices):
    CANONICAL = "canonical", "canonical"
    REVIEWED = "reviewed", "reviewed"
    COMMUNITY = "community", "community"
    TRANSCRIPT = "transcript", "transcript"


class Registry(models.Model):
    """The last good source registry (sources.yml) loaded from the registry repository.

    One row per registry location; `content` is the raw YAML of the last valid load so the
    admin can show it, and `last_error` the problem of the last invalid one (kept, not served).
    """

    location = models.CharField(max_length=500, unique=True, help_text="repo URL/path, ref and file path")
    commit = models.CharField(max_length=64, blank=True)
    content = models.TextField(blank=True)
    loaded_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "registries"

    def __str__(self) -> str:
        return self.location


class Repository(models.Model):
    """A repository listed in the source registry. Rows are upserted from the registry at
    every ingest; a repo removed from the registry is disabled, not deleted (its index stays
    until purged)."""

    registry = models.ForeignKey(
        Registry, null=True, blank=True, on_delete=models.SET_NULL, related_name="repositories"
    )
    name = models.CharField(max_length=200, unique=True, help_text="owner/name")
    url = models.CharField(max_length=500, help_text="https URL, file:// URL or local path")
    ref = models.CharField(max_length=200, default="main")
    trust = models.CharField(max_length=16, choices=TrustTier.choices, default=TrustTier.REVIEWED)
    owners = models.JSONField(default=list, blank=True)
    include = models.JSONField(default=list, blank=True)
    exclude = models.JSONField(default=list, blank=True)
    enabled = models.BooleanField(default=True)
    is_transcript = models.BooleanField(default=False)
    last_commit = models.CharField(max_length=64, blank=True)
    last_ingested_at = models.DateTimeField(null=True, blank=True)
    index_version = models.PositiveSmallIntegerField(
        default=0, help_text="recipe the chunks were indexed by (groundtruth/ingest/index_text.py); 0: never indexed"
    )
    # Kept by the ingest swap, so lists and the admin need no COUNT over the chunks.
    file_count = models.PositiveIntegerField(default=0)
    chunk_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "repositories"

    def __str__(self) -> str:
        return self.name


class IngestStatus(models.TextChoices):
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    SUCCEEDED = "succeeded", "succeeded"
    FAILED = "failed", "failed"


class IngestTrigger(models.TextChoices):
    """What asked for a run: the beat schedule, a git host's push webhook (POST /hooks/git), POST
    /ingest/repo with a service key, a staff member (the admin's "Ingest now", or POST
    /ingest/repo signed in), `manage.py ingest`/`reindex`/`seed_demo`, or the `ingest_repo` task
    called directly without a run (nothing in the service does; a Celery shell might)."""

    BEAT = "beat", "beat"
    PUSH = "push", "push"
    API = "api", "api"
    ADMIN = "admin", "admin"
    COMMAND = "command", "command"
    TASK = "task", "task"


class IngestRun(models.Model):
    repository = models.ForeignKey(Repository, on_delete=models.CASCADE, related_name="runs")
    ref = models.CharField(max_length=200)
    follows_registry_ref = models.BooleanField(
        default=False,
        help_text="no ref was asked for: the worker ingests the ref sources.yml names when it re-reads it",
    )
    commit = models.CharField(max_length=64, blank=True)
    status = models.CharField(max_length=16, choices=IngestStatus.choices, default=IngestStatus.QUEUED)
    trigger = models.CharField(max_length=16, choices=IngestTrigger.choices, default=IngestTrigger.TASK)
    phase = models.CharField(max_length=32, blank=True, help_text="what a running ingest is doing")
    files_total = models.PositiveIntegerField(default=0, help_text="files selected at the commit")
    files_processed = models.PositiveIntegerField(default=0, help_text="files to (re)chunk done so far")
    files_skipped = models.JSONField(default=list, blank=True, help_text="[path, reason] of skipped files")
    attempts = models.PositiveIntegerField(default=0, help_text="times a worker started this run")
    files_added = models.PositiveIntegerField(default=0)
    files_updated = models.PositiveIntegerField(default=0)
    files_removed = models.PositiveIntegerField(default=0)
    files_unchanged = models.PositiveIntegerField(default=0)
    chunks_added = models.PositiveIntegerField(default=0)
    chunks_updated = models.PositiveIntegerField(default=0)
    chunks_removed = models.PositiveIntegerField(default=0)
    chunks_unchanged = models.PositiveIntegerField(default=0)
    chunks_embedded = models.PositiveIntegerField(default=0)
    timings = models.JSONField(default=dict, blank=True, help_text="seconds per phase")
    error = models.TextField(blank=True)
    task_id = models.CharField(max_length=64, blank=True)
    worker = models.CharField(max_length=200, blank=True, help_text="the Celery node that holds (or held) the run")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            # One queued-or-running run per repository: a second request gets the active one.
            models.UniqueConstraint(
                fields=["repository"],
                condition=Q(status__in=["queued", "running"]),
                name="one_active_ingest_run_per_repository",
            )
        ]

    def __str__(self) -> str:
        return f"{self.repository.name} run #{self.pk} ({self.status})"


class PushDelivery(models.Model):
    """A push webhook delivery (POST /hooks/git) by its host's delivery id, with what it did.

    A git host sends a delivery again (a redelivery from its settings page, a retry after a
    timeout) with the same id: it is answered from `outcome` and queues nothing. `outcome` is
    null while the first delivery is being handled, then `{"ignored": reason}` or
    `{"run_ids": [...], "registry": bool}`. Rows older than the retention are deleted as new
    deliveries arrive (groundtruth/ingest/push.py)."""

    delivery_id = models.CharField(max_length=200, unique=True)
    provider = models.CharField(max_length=16, help_text="github, gitlab or gitea (Forgejo too)")
    event = models.CharField(max_length=64)
    received_at = models.DateTimeField(db_index=True)
    outcome = models.JSONField(null=True, blank=True, help_text="null while being handled")

    class Meta:
        ordering = ["-received_at"]
        verbose_name_plural = "push deliveries"

    def __str__(self) -> str:
        return f"{self.provider} delivery {self.delivery_id}"


class SourceFile(models.Model):
    repository = models.ForeignKey(Repository, on_delete=models.CASCADE, related_name="files")
    path = models.CharField(max_length=1000)
    blob_sha = models.CharField(max_length=64)
    commit = models.CharField(max_length=64, help_text="commit at which this blob was last indexed")
    size = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["repository", "path"]
        constraints = [models.UniqueConstraint(fields=["repository", "path"], name="unique_source_file_path")]

    def __str__(self) -> str:
        return self.path


class SourceBlob(models.Model):
    """The text of an indexed file, once per git blob SHA (content-addressed: one row serves every
    commit, path and repository that holds those bytes). Written by the ingest before it writes the
    files that cite it, read by GET /sources, every `source_url` and MCP `read_source`, so that a
    web host needs no git cache. A row lives while some SourceFile of any repository names its SHA
    (groundtruth/source_store.py collects the others)."""

    sha = models.CharField(max_length=64, primary_key=True)
    text = models.TextField(help_text="the file's bytes decoded as UTF-8 (the ingest stores text files only)")
    size = models.PositiveIntegerField(help_text="bytes")
    stored_at = models.DateTimeField()

    class Meta:
        db_table = "groundtruth_source_blob"

    def __str__(self) -> str:
        return f"blob {self.sha[:12]} ({self.size} bytes)"


class Chunk(models.Model):
    """A cited piece of a source file. `embedding` is the vector of the passage (repository label,
    heading trail and text) and `heading_embedding` the vector of its own section title (null
    without one); neither has a fixed dimension in the column type: the HNSW indexes are built on
    a cast to the configured model's dimension (`groundtruth/vector_index.py`)."""

    repository = models.ForeignKey(Repository, on_delete=models.CASCADE, related_name="chunks")
    source_file = models.ForeignKey(SourceFile, on_delete=models.CASCADE, related_name="chunks")
    path = models.CharField(max_length=1000)
    commit = models.CharField(max_length=64)
    start_line = models.PositiveIntegerField()
    end_line = models.PositiveIntegerField()
    heading = models.JSONField(default=list, blank=True, help_text="heading trail, outermost first")
    text = models.TextField()
    content_hash = models.CharField(max_length=64)
    trust = models.CharField(max_length=16, choices=TrustTier.choices)
    ordinal = models.PositiveIntegerField(default=0, help_text="position of the chunk in its file")
    search_vector = SearchVectorField(null=True)
    lexeme_count = models.PositiveIntegerField(default=0)
    embedding = VectorField(null=True, blank=True)
    heading_embedding = VectorField(null=True, blank=True)
    embedding_model = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["repository", "path", "ordinal"]
        indexes = [
            GinIndex(fields=["search_vector"], name="chunk_search_vector_gin"),
            models.Index(fields=["repository", "path"], name="chunk_repository_path"),
            models.Index(fields=["repository", "content_hash"], name="chunk_repository_content_hash"),
        ]

    def __str__(self) -> str:
        return f"{self.path}:{self.start_line}-{self.end_line}"


class LexemeStatistic(models.Model):
    """How many chunks of a repository contain a lexeme: BM25's document frequency, summed over
    the repositories for the corpus. Recounted with set-based SQL after an ingest and read by the
    search (groundtruth/search/lexical_index.py, lexical_search.py); a model so that it goes with
    its repository and is flushed with the other tables."""

    repository = models.ForeignKey(Repository, on_delete=models.CASCADE, related_name="+")
    lexeme = models.TextField()
    document_count = models.PositiveIntegerField()

    class Meta:
        db_table = "groundtruth_lexeme_statistic"
        constraints = [models.UniqueConstraint(fields=["repository", "lexeme"], name="unique_repository_lexeme")]
        indexes = [models.Index(fields=["lexeme"], name="lexeme_statistic_lexeme")]

    def __str__(self) -> str:
        return f"{self.lexeme} in {self.document_count} chunks"


class CorpusStatistic(models.Model):
    """A repository's indexed chunk count and total length in lexemes (BM25's N and avgdl, summed
    over the repositories)."""

    repository = models.OneToOneField(Repository, on_delete=models.CASCADE, primary_key=True, related_name="+")
    document_count = models.PositiveBigIntegerField()
    total_length = models.PositiveBigIntegerField()
    # groundtruth/search/everyday_words.py; null until the first recount that measures it.
    everyday_share = models.FloatField(
        null=True, blank=True, help_text="share of the embedding model's everyday words the repository uses"
    )
    refreshed_at = models.DateTimeField()

    class Meta:
        db_table = "groundtruth_corpus_statistic"

    def __str__(self) -> str:
        return f"{self.document_count} chunks, {self.total_length} lexemes"


class RelevanceJudge(models.Model):
    """A relevance judge (late interaction over MiniLM's token vectors) fitted on pairs mined from
    the indexed documentation itself (`groundtruth/judge/`): no question with a known answer goes
    into it. The newest row whose artifact loads is the one search uses; `thresholds` are its
    per-repository refusal thresholds, calibrated on its own held-out mined pairs (the judge
    score below which a set share of mined positives falls)."""

    fitted_at = models.DateTimeField(auto_now_add=True)
    index_version = models.PositiveSmallIntegerField(help_text="chunk recipe of the index it was fitted on")
    chunk_count = models.PositiveIntegerField(default=0, help_text="chunks in the fitted repositories")
    repositories = models.JSONField(default=list, help_text="names of the repositories it was mined from")
    pair_count = models.PositiveIntegerField(help_text="(query, passage) pairs trained on")
    query_count = models.PositiveIntegerField(help_text="mined queries trained on")
    held_out_query_count = models.PositiveIntegerField(default=0)
    held_out_accuracy = models.FloatField(help_text="share of held-out mined queries whose own passage scores first")
    held_out_pairwise_accuracy = models.FloatField(default=0.0, help_text="positive above negative, pair by pair")
    thresholds = models.JSONField(default=dict, blank=True, help_text="repository name -> refusal threshold")
    default_threshold = models.FloatField(default=0.0, help_text="pooled threshold, for repositories without one")
    seed = models.IntegerField(default=0)
    fit_seconds = models.FloatField(default=0.0)
    peak_rss_mb = models.FloatField(default=0.0)
    artifact = models.CharField(max_length=1000, help_text="directory of the weights and tokenizer")

    class Meta:
        ordering = ["-fitted_at", "-id"]

    def __str__(self) -> str:
        return f"judge #{self.pk} ({self.pair_count} pairs, held-out accuracy {self.held_out_accuracy:.3f})"


class AdaptationStatus(models.TextChoices):
    FITTED = "fitted", "fitted"
    STAGING = "staging", "re-embedding the index"
    ACTIVE = "active", "active"
    RETIRED = "retired", "retired"
    FAILED = "failed", "failed"


class AdaptedEncoder(models.Model):
    """The embedding model fine-tuned on pairs mined from the indexed documentation itself
    (`groundtruth/adaptation/`): no question with a known answer goes into it. Its vectors are a
    space of their own (`model_name`, named by its weights): every chunk is re-embedded into
    `StagedVector` first, then the index and the query model switch together
    (`encoder_switch`). At most one row is ACTIVE; with none, the packaged model embeds."""

    fitted_at = models.DateTimeField(auto_now_add=True)
    status = models.CharField(max_length=16, choices=AdaptationStatus.choices, default=AdaptationStatus.FITTED)
    status_changed_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    index_version = models.PositiveSmallIntegerField(help_text="chunk recipe of the index it was fitted on")
    base_model = models.CharField(max_length=200, help_text="the vector space it was fine-tuned from")
    model_name = models.CharField(max_length=200, help_text="its own vector space: name@weights")
    directory = models.CharField(
        max_length=1000,
        help_text="where the fitting host kept the model's files (weights, tokenizer); every host restores them "
        "from the stored files under its own ENCODER_ADAPTATION_DIR, in a directory of the same name",
    )
    repositories = models.JSONField(default=list, help_text="names of the repositories it was mined from")
    chunk_count = models.PositiveIntegerField(default=0, help_text="chunks in those repositories")
    mined_query_count = models.PositiveIntegerField(default=0)
    query_count = models.PositiveIntegerField(help_text="mined queries trained on")
    held_out_query_count = models.PositiveIntegerField(default=0, help_text="held-out mined queries measured")
    held_out_accuracy_before = models.FloatField(help_text="the base model: own passage above its negatives")
    held_out_accuracy = models.FloatField(help_text="this model: own passage above its mined negatives")
    seed = models.IntegerField(default=0)
    fit_seconds = models.FloatField(default=0.0)
    peak_rss_mb = models.FloatField(default=0.0, help_text="the training process's peak resident memory")
    staged_count = models.PositiveIntegerField(default=0, help_text="chunks re-embedded into its space so far")

    class Meta:
        ordering = ["-fitted_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["status"], condition=Q(status="active"), name="one_active_adapted_encoder")
        ]

    def __str__(self) -> str:
        return f"adapted encoder #{self.pk} {self.model_name} ({self.status})"


class AdaptedEncoderFile(models.Model):
    """One part of one file of an adapted encoder's model directory, stored with the encoder's row
    (`groundtruth/adaptation/model_files.py`) so that every host can rebuild the directory from
    PostgreSQL alone. Files are split into parts of a few MB: neither storing nor restoring holds a
    whole file (the weights are about 90 MB) in memory. Every part repeats its whole file's sha256
    and size, which the restore checks once the file is written."""

    encoder = models.ForeignKey(AdaptedEncoder, on_delete=models.CASCADE, related_name="files")
    relative_path = models.CharField(max_length=500, help_text="the file's path inside the model directory")
    part = models.PositiveIntegerField(help_text="0 for the file's first bytes")
    content = models.BinaryField()
    file_sha256 = models.CharField(max_length=64, help_text="the whole file's")
    file_size = models.BigIntegerField(help_text="the whole file's, in bytes")

    class Meta:
        db_table = "groundtruth_adapted_encoder_file"
        constraints = [
            models.UniqueConstraint(fields=["encoder", "relative_path", "part"], name="one_adapted_encoder_file_part")
        ]

    def __str__(self) -> str:
        return f"part {self.part} of {self.relative_path} of adapted encoder #{self.encoder_id}"


class StagedVector(models.Model):
    """A chunk's vectors in the space of an adapted encoder being switched to, written before
    the switch so that readers keep the current vectors until every chunk has its new ones. A
    chunk rewritten meanwhile (its content hash changed) or deleted is re-embedded at the switch
    or dropped with it."""

    chunk = models.OneToOneField(Chunk, on_delete=models.CASCADE, primary_key=True, related_name="+")
    encoder = models.ForeignKey(AdaptedEncoder, on_delete=models.CASCADE, related_name="+")
    content_hash = models.CharField(max_length=64)
    embedding = VectorField()
    heading_embedding = VectorField(null=True, blank=True)

    class Meta:
        db_table = "groundtruth_staged_vector"

    def __str__(self) -> str:
        return f"staged vectors of chunk {self.chunk_id}"


class AskedQuestion(models.Model):
    """One question put to /search, /ask or an MCP tool: who asked (the key's prefix, never its
    secret), what, over which repositories, and whether the documentation answered. Queued by
    each call and inserted in batches by a writer thread (groundtruth/question_audit.py); purged
    after QUESTION_AUDIT_RETENTION_DAYS."""

    asked_at = models.DateTimeField(db_index=True)
    key_prefix = models.CharField(max_length=40, db_index=True, help_text="sk_<lookup>, or staff:<username>")
    via = models.CharField(max_length=32, help_text="search, ask, mcp:search_docs, mcp:ask")
    question = models.TextField()
    repositories = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    sources_missing = models.BooleanField(help_text="ask: sources_missing; search: no passage found")

    class Meta:
        ordering = ["-asked_at", "-id"]
        indexes = [GinIndex(fields=["repositories"], name="asked_question_repositories")]

    def __str__(self) -> str:
        return f"{self.question[:60]} ({self.key_prefix})"
