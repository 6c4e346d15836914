"""Request bodies sent with Transfer-Encoding: chunked (no Content-Length) are read like any other
through gunicorn (up to MAX_REQUEST_BODY_BYTES, 413 beyond); a server that does not de-chunk gets
a 411 problem instead of an empty body. The Django test client cannot send a chunked request, so
the first tests go through the real web server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from django.test import RequestFactory

from agentplatform.plumbing.errors import ProblemDetailsMiddleware
from agents.models import WalletSession
from groundtruth.models import IngestRun, Registry, Repository
from tests import celeryworker
from tests.groundtruth.factories import service_key
from tests.liveserver import gunicorn_server

PROBLEM = "application/problem+json"


def chunked(body: bytes, size: int = 1000) -> Iterator[bytes]:
    """httpx sends a generator's pieces as chunks, with Transfer-Encoding: chunked."""
    for start in range(0, len(body), size):
        yield body[start : start + size]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_chunked_bodies_are_read_through_gunicorn_and_one_over_the_limit_is_413(tmp_path: Path):
    key = service_key("ingest")
    environment = {
        "DATABASE_URL": celeryworker.test_database_url(),
        "EMBEDDING_BACKEND": "none",
        "MAX_REQUEST_BODY_BYTES": "4096",
    }
    json_type = {"Content-Type": "application/json"}
    with gunicorn_server(environment=environment, log_path=tmp_path / "web.log") as base_url:
        with httpx.Client(base_url=base_url, timeout=20) as client:
            sign_in = client.post(
                "/api/auth/wallet",
                content=chunked(json.dumps({"message": "x" * 1500, "signature": "nope"}).encode()),
                headers=json_type,
            )
            ingest = client.post(
                "/ingest/repo",
                content=chunked(b'{"repo": "acme/handbook", "ref": "main;id"}', size=7),
                headers={**json_type, "Authorization": f"Bearer {key}"},
            )
            malformed = client.post("/api/auth/wallet", content=chunked(b'{"message": '), headers=json_type)
            too_large = client.post(
                "/api/auth/wallet", content=chunked(json.dumps({"message": "x" * 4100}).encode()), headers=json_type
            )

    assert "content-length" not in sign_in.request.headers
    assert sign_in.request.headers["transfer-encoding"] == "chunked"
    # Without the fix the body read as {}: "message: This field is required." and the same for signature.
    assert (sign_in.status_code, sign_in.json()["errors"]) == (
        400,
        [{"field": "signature", "message": "must be a 65-byte hex signature (0x followed by 130 hex digits)"}],
    )
    # Without the fix `{}`: every enabled repository.
    assert (ingest.status_code, [error["field"] for error in ingest.json()["errors"]]) == (400, ["ref"])
    assert (malformed.status_code, malformed.headers["content-type"], malformed.json()["code"]) == (
        400,
        PROBLEM,
        "invalid_json",
    )
    assert (too_large.status_code, too_large.headers["content-type"], too_large.json()) == (
        413,
        PROBLEM,
        {
            "type": "urn:problem:body_too_large",
            "title": "Request Entity Too Large",
            "status": 413,
            "detail": "The request body is larger than the limit of 4096 bytes.",
            "code": "body_too_large",
        },
    )
    assert (WalletSession.objects.count(), IngestRun.objects.count(), Repository.objects.count()) == (0, 0, 0)
    assert Registry.objects.count() == 0


@pytest.mark.django_db
def test_a_chunked_body_the_server_did_not_dechunk_is_411_problem():
    request = RequestFactory().post(
        "/ingest/repo", b"", content_type="application/json", HTTP_TRANSFER_ENCODING="chunked"
    )
    request.META.pop("CONTENT_LENGTH", None)  # as Django's runserver passes a chunked request on

    response = ProblemDetailsMiddleware(lambda request: pytest.fail("the view must not run"))(request)

    assert (response.status_code, response["Content-Type"]) == (411, PROBLEM)
    assert json.loads(response.content) == {
        "type": "urn:problem:length_required",
        "title": "Length Required",
        "status": 411,
        "detail": "This server cannot read a chunked body here; send the body with Content-Length.",
        "code": "length_required",
    }
