"""The ground-truth service's routes: the apps' URL confs that agentplatform/urls.py mounts at the
root or under GROUNDTRUTH_PREFIX, and the paths they answer (API paths: agentplatform/plumbing/errors.py
renders their errors as problem details, asking `api_path_prefixes` through
settings.API_PATH_PREFIXES_FUNCTION). A route added to one of these URL confs is an API path without
being listed anywhere else."""

from __future__ import annotations

from importlib import import_module

from django.conf import settings

# /health (agentplatform/health.py) is mounted with them: it reports on the service they make up.
GROUND_TRUTH_URLCONFS = ("agentplatform.health", "groundtruth.urls", "brandassets.urls")


def ground_truth_mount() -> str:
    """The route the ground-truth URL confs are included at: "" or "<GROUNDTRUTH_PREFIX>/"."""
    return f"{settings.GROUNDTRUTH_PREFIX}/" if settings.GROUNDTRUTH_PREFIX else ""


def ground_truth_path_prefixes() -> tuple[str, ...]:
    """`/<mount><first segment>` of every ground-truth route (`/health`, `/ingest`, `/assets`, ...),
    read from the URL confs (by name, as `include()` reads them)."""
    segments = {
        str(route.pattern).split("/", 1)[0]
        for urlconf in GROUND_TRUTH_URLCONFS
        for route in import_module(urlconf).urlpatterns
    }
    return tuple(f"/{ground_truth_mount()}{segment}" for segment in sorted(segments))


def api_path_prefixes() -> tuple[str, ...]:
    """/api/ and the paths of the ground-truth routes, as mounted by agentplatform/urls.py."""
    return ("/api/", *ground_truth_path_prefixes())
