"""Demo sources: real local git repositories and a registry listing them.

`demo_sources_create(root=VAR_DIR / "demo-sources")` builds (once; an existing registry is left
as it is):

    root/registry               sources.yml (+ any extra_registry_files), 2 commits
    root/acme-handbook          Markdown docs, YAML and TOML config, 3 commits (one rename)
    root/acme-platform-docs     reStructuredText docs and a JSON config, 2 commits
    root/acme-community-notes   Markdown FAQ, 2 commits (listed by the registry's second commit)
    root/acme-transcripts       a raw meeting transcript (listed under transcripts, disabled)

and returns the registry repository's path, which is where SOURCE_REGISTRY_REPO points when it
is unset.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from agentplatform.demo.git_repositories import demo_repository_commit


def demo_sources_create(*, root: Path, extra_registry_files: Mapping[str, str | bytes] | None = None) -> Path:
    """Builds the demo repositories and registry under `root`; returns the registry's path."""
    root = Path(root).resolve()
    registry = root / "registry"
    if (registry / ".git").exists():
        return registry
    handbook = root / "acme-handbook"
    platform_docs = root / "acme-platform-docs"
    community = root / "acme-community-notes"
    transcripts = root / "acme-transcripts"

    demo_repository_commit(handbook, _HANDBOOK_V1, "Handbook: getting started, deployment, service config")
    demo_repository_commit(handbook, _HANDBOOK_V2, "Handbook: incident runbook, pyproject")
    demo_repository_commit(
        handbook,
        _HANDBOOK_V3,
        "Handbook: move deployment under operations, document rollbacks",
        renames={"docs/deploy.md": "docs/operations/deploy.md"},
    )
    demo_repository_commit(platform_docs, _PLATFORM_V1, "Platform docs: API overview and limits")
    demo_repository_commit(platform_docs, _PLATFORM_V2, "Platform docs: rate-limit headers, error format")
    demo_repository_commit(community, _COMMUNITY_V1, "Community notes: FAQ")
    demo_repository_commit(community, _COMMUNITY_V2, "Community notes: wallet questions")
    demo_repository_commit(transcripts, _TRANSCRIPTS, "Raw transcript of the 2024-05 planning call")

    first = _SOURCES_TEMPLATE.format(
        handbook=handbook, platform_docs=platform_docs, community="", transcripts=transcripts
    )
    demo_repository_commit(registry, {"sources.yml": first, **(extra_registry_files or {})}, "Registry: two repos")
    community_entry = _COMMUNITY_ENTRY.format(community=community)
    second = _SOURCES_TEMPLATE.format(
        handbook=handbook, platform_docs=platform_docs, community=community_entry, transcripts=transcripts
    )
    demo_repository_commit(registry, {"sources.yml": second}, "Registry: add the community notes")
    return registry


_SOURCES_TEMPLATE = """\
# Source registry of the demo: which repositories the ground-truth service indexes.
defaults:
  ref: main
  include: ["README.md", "docs/**/*.md", "docs/**/*.rst"]
  exclude: ["**/node_modules/**", "**/drafts/**"]
  trust: reviewed
repos:
  - name: acme/handbook
    url: {handbook}
    owners: [docs-team]
    trust: canonical
    include: ["README.md", "docs/**/*.md", "config/*.yml", "pyproject.toml"]
  - name: acme/platform-docs
    url: {platform_docs}
    owners: [platform-team]
    trust: reviewed
    include: ["docs/**/*.rst", "config/*.json"]
{community}transcripts:
  enabled: false
  repos:
    - name: acme/transcripts
      url: {transcripts}
      owners: [product]
      include: ["calls/**/*.md"]
"""

_COMMUNITY_ENTRY = """\
  - name: acme/community-notes
    url: {community}
    owners: [community]
    trust: community
"""

_HANDBOOK_V1: dict[str, str | bytes | None] = {
    "README.md": """\
# Acme Agent Platform handbook

The handbook is the canonical description of how the Acme agent platform is run.
Start with [getting started](docs/getting-started.md).
""",
    "docs/getting-started.md": """\
# Getting started

## Requirements

You need Python 3.11, PostgreSQL 16 or newer with the pgvector extension, and Redis 7.

## Install

Create a virtual environment and install the pinned requirements:

```sh
python3.11 -m venv .venv
.venv/bin/pip install -r requirements.txt
```

## First run

Run `make run`. It applies the migrations, loads the demo data and starts the web server,
one Celery worker and Celery beat. The web server listens on port 8000.

## Service keys

The ground-truth endpoints need a service key with scope `read` (and `ingest` to start an
ingest). Staff create keys in the admin; the secret is shown once.
""",
    "docs/deploy.md": """\
# Deployment

## Environments

There are two environments: `staging` and `production`. Every merge to main deploys to
staging; production deploys are started by hand from the release pipeline.

## Database migrations

Migrations run before the new web workers start. A migration that rewrites a large table
must be split into an additive step and a cleanup step released a week later.
""",
    "config/service.yml": """\
# Service settings shared by every environment.
service:
  name: acme-agents
  port: 8000
  workers: 4
celery:
  concurrency: 2
  ingest_schedule: "17 * * * *"
rate_limits:
  public: 100/m
  authenticated: 500/m
  trading: 60/m
""",
}

_HANDBOOK_V2: dict[str, str | bytes | None] = {
    "docs/runbook.md": """\
# Incident runbook

## Paging

The on-call engineer is paged when the error rate of the API stays above 2% for five
minutes, or when `/health` answers 503 twice in a row.

## Ingest stuck

An ingest run that stops sending heartbeats for two minutes is marked failed automatically;
the previous index keeps being served. Start a new run with `POST /ingest/repo`.

## Redis down

Rate limits fail open while Redis is unreachable; the chat feed keeps working. Celery tasks
wait in the broker until Redis is back.
""",
    "pyproject.toml": """\
[project]
name = "acme-agents"
requires-python = ">=3.11"

[tool.ruff]
line-length = 120

[tool.pytest.ini_options]
addopts = "-q"
""",
}

_HANDBOOK_V3: dict[str, str | bytes | None] = {
    "docs/operations/deploy.md": """\
# Deployment

## Environments

There are two environments: `staging` and `production`. Every merge to main deploys to
staging; production deploys are started by hand from the release pipeline.

## Database migrations

Migrations run before the new web workers start. A migration that rewrites a large table
must be split into an additive step and a cleanup step released a week later.

## Rollbacks

Roll back by redeploying the previous release tag. Never roll back a migration in
production; ship a forward fix instead.
""",
}

_PLATFORM_V1: dict[str, str | bytes | None] = {
    "docs/index.rst": """\
======================
Acme platform API docs
======================

The platform exposes agents, the token price history and a chat feed under ``/api/``.

Authentication
==============

Send an API key as ``Authorization: Bearer <key>``. Agent keys start with ``ak_``,
user keys with ``uk_`` and service keys with ``sk_``.
""",
    "docs/limits.rst": """\
Limits
======

Rate limits
-----------

Public endpoints allow 100 requests per minute per client IP address. Authenticated
callers get 500 requests per minute per key. Endpoints that move tokens allow 60.

Sizes
-----

Request bodies are limited to 64 KiB. Chat messages hold 1 to 2000 characters.
""",
    "config/limits.json": """\
{
  "rate_limits": {
    "public_per_minute": 100,
    "authenticated_per_minute": 500,
    "trading_per_minute": 60
  },
  "max_request_body_bytes": 65536
}
""",
}

_PLATFORM_V2: dict[str, str | bytes | None] = {
    "docs/errors.rst": """\
Errors
======

Every error is an RFC 9457 problem details document with the media type
``application/problem+json`` and the fields ``type``, ``title``, ``status``, ``detail`` and
``code``. Validation errors add ``errors``, a list of ``{field, message}``.

Rate-limit headers
------------------

Every rate-limited response carries ``X-RateLimit-Limit``, ``X-RateLimit-Remaining`` and
``X-RateLimit-Reset``. Past the limit the API answers 429 with ``Retry-After``.
""",
}

_COMMUNITY_V1: dict[str, str | bytes | None] = {
    "README.md": "# Community notes\n\nAnswers collected from the community forum. Not reviewed by the core team.\n",
    "docs/faq.md": """\
# FAQ

## Why is my agent paused?

Agents are paused by staff when their balance cannot cover one hour of costs.
""",
}

_COMMUNITY_V2: dict[str, str | bytes | None] = {
    "docs/faq.md": """\
# FAQ

## Why is my agent paused?

Agents are paused by staff when their balance cannot cover one hour of costs.

## How do I sign in with my wallet?

Ask for a nonce at `GET /api/auth/nonce`, sign the Sign-In with Ethereum message with your
wallet, and post it to `POST /api/auth/wallet`. The session token lasts 24 hours.
""",
}

_TRANSCRIPTS: dict[str, str | bytes | None] = {
    "calls/2024-05-planning.md": """\
# Planning call, May 2024 (raw transcript)

Speaker 1: maybe we raise the public rate limit to 200? not decided.
Speaker 2: let's keep 100 until the cache lands.
""",
}
