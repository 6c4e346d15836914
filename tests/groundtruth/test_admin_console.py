"""The staff console in the admin: "Ask the docs" over a real git repository ingested in the test,
the live progress of an ingest run (its JSON poll and its page), and "Re-ingest now"."""

from __future__ import annotations

import json

import pytest
from django.utils.html import escape

from groundtruth.ingest.foreground import ingest_foreground
from groundtruth.models import IngestRun, IngestStatus
from groundtruth.search.abstention_model import abstention_model_parse
from groundtruth.search.answer_composition import NOT_IN_SOURCES
from groundtruth.search.inspection import FeatureEvidence, SourceLine
from tests.groundtruth.factories import IngestRunFactory, RepositoryFactory, bearer, service_key
from tests.groundtruth.fits import abstention_fit_use
from tests.groundtruth.search_fixtures import chat_server_run

pytestmark = pytest.mark.django_db

ASK_PAGE = "/admin/console/ask/"
DOCUMENTED = "Where do I set ACME_TOKEN?"
ABSENT = "How do I rotate Kubernetes secrets?"


@pytest.fixture(autouse=True)
def hand_made_abstention(settings, tmp_path):
    """A sources-missing model whose decisions these tests can reason about: the question's words
    must be in the documentation (known) and in a top passage (coverage)."""
    abstention_fit_use(
        settings, tmp_path, model=abstention_model_parse({"intercept": -4, "known": 4, "coverage": 4}), threshold=0.5
    )
    settings.LLM_BASE_URL = ""


@pytest.fixture
def ingested(handbook_registered, embedding_server) -> IngestRun:
    [run] = ingest_foreground(repository_name="acme/handbook", ref=None)
    assert run.status == IngestStatus.SUCCEEDED, run.error
    return run


@pytest.fixture
def staff(client, django_user_model):
    user = django_user_model.objects.create_user("staff", password="pw-123456789", is_staff=True)
    client.force_login(user)
    return user


@pytest.fixture
def superuser(client, django_user_model):
    user = django_user_model.objects.create_superuser("admin", "admin@example.invalid", "pw-123456789")
    client.force_login(user)
    return user


def test_ask_page_sends_anonymous_visitors_to_the_sign_in_page(client):
    response = client.get(ASK_PAGE, {"q": DOCUMENTED})

    assert response.status_code == 302
    assert response["Location"] == "/admin/login/?next=/admin/console/ask/%3Fq%3DWhere%2Bdo%2BI%2Bset%2BACME_TOKEN%253F"


def test_ask_page_refuses_a_signed_in_user_who_is_not_staff(client, django_user_model):
    client.force_login(django_user_model.objects.create_user("member", password="pw-123456789"))

    response = client.get(ASK_PAGE)

    assert response.status_code == 302
    assert response["Location"] == "/admin/login/?next=/admin/console/ask/"


def test_admin_index_links_the_console(client, staff):
    page = client.get("/admin/").content.decode()

    assert '<a href="/admin/console/ask/">Ask the docs</a>' in page
    assert '<a href="/admin/groundtruth/ingestrun/">Ingest runs</a>' in page


def test_ask_page_without_a_question_is_the_empty_form_listing_enabled_repositories(client, staff):
    RepositoryFactory(name="acme/handbook")
    RepositoryFactory(name="acme/archive", enabled=False)

    response = client.get(ASK_PAGE)

    assert response.status_code == 200
    assert "inspection" not in response.context
    assert response.context["form"].fields["repo"].choices == [("acme/handbook", "acme/handbook")]
    assert 'id="ask-result"' not in response.content.decode()


def test_a_documented_question_shows_the_cited_lines_highlighted_with_their_ranks(client, staff, ingested):
    response = client.get(ASK_PAGE, {"q": DOCUMENTED, "repo": ["acme/handbook"]})

    assert response.status_code == 200
    inspection = response.context["inspection"]
    commit = ingested.commit
    assert (inspection.ask.sources_missing, inspection.repositories) == (False, ["acme/handbook"])
    [citation] = inspection.citations
    assert (citation.number, citation.repo, citation.path, citation.commit, citation.line, citation.end_line) == (
        1,
        "acme/handbook",
        "docs/index.md",
        commit,
        16,
        16,
    )
    assert (citation.lexical_rank, citation.dense_rank, citation.fused_score) == (1, 1, 0.1)  # (0.1 + 1) / (10 + 1)
    assert citation.lines == [
        SourceLine(number=13, text="", cited=False),
        SourceLine(number=14, text="## Configure", cited=False),
        SourceLine(number=15, text="", cited=False),
        SourceLine(number=16, text="Set `ACME_TOKEN` in the environment.", cited=True),
    ]
    assert citation.lines_error == ""
    # The /search column: the whole chunk cited, three lines of context before it (none after:
    # the file ends), and each hit's ranks in both legs.
    first = inspection.hits[0]
    assert (first.path, first.line, first.end_line, first.lexical_rank, first.dense_rank) == (
        "docs/index.md",
        14,
        16,
        1,
        1,
    )
    assert [(line.number, line.cited) for line in first.lines] == [
        (11, False),
        (12, False),
        (13, False),
        (14, True),
        (15, True),
        (16, True),
    ]
    page = response.content.decode()
    assert '<tr class="cited"><td class="line-number">16</td><td>Set `ACME_TOKEN` in the environment.</td></tr>' in page
    assert '<tr><td class="line-number">14</td><td>## Configure</td></tr>' in page
    assert 'id="sources-found"' in page and 'id="sources-missing"' not in page
    assert 'lexical rank <strong class="lexical-rank">1</strong>' in page
    assert 'dense rank <strong class="dense-rank">1</strong>' in page
    assert 'fused score <strong class="fused-score">0.1</strong>' in page
    assert f'relevance <strong class="relevance">{first.relevance}</strong>' in page


def test_the_console_shows_exactly_what_ask_and_search_answer(client, api_client, staff, ingested):
    reader = bearer(service_key("read"))
    asked = api_client.post("/ask", {"question": DOCUMENTED}, format="json", **reader).json()
    searched = api_client.get("/search", {"q": DOCUMENTED, "limit": 4}, **reader).json()

    response = client.get(ASK_PAGE, {"q": DOCUMENTED, "limit": "4"})

    assert json.loads(response.context["ask_json"]) == asked
    assert [
        (hit.chunk_id, hit.fused_score, hit.relevance, hit.source_url) for hit in response.context["inspection"].hits
    ] == [
        (result["chunk_id"], result["score"], result["relevance"], result["citation"]["source_url"])
        for result in searched["results"]
    ]
    assert all(hit.relevance is not None for hit in response.context["inspection"].hits)
    [citation] = asked["citations"]
    assert f'<a class="source-link" href="{escape(citation["source_url"])}"' in response.content.decode()


def test_an_unanswerable_question_shows_sources_missing_with_the_evidence(client, staff, ingested):
    response = client.get(ASK_PAGE, {"q": ABSENT})

    assert response.status_code == 200
    inspection = response.context["inspection"]
    evidence = inspection.evidence
    assert (inspection.ask.sources_missing, inspection.ask.citations, inspection.citations) == (True, [], [])
    assert (evidence.sources_missing, evidence.probability, evidence.threshold) == (True, 0.018, 0.5)
    assert (evidence.intercept, evidence.logit, evidence.language_model_refused) == (-4.0, -4.0, False)
    assert evidence.reason == "The model's probability that the passages answer, 0.0180, is below the threshold 0.5."
    weighed = [feature for feature in evidence.features if feature.weight]
    assert weighed == [
        FeatureEvidence(name="coverage", value=0.0, weight=4.0, contribution=0.0),
        FeatureEvidence(name="known", value=0.0, weight=4.0, contribution=0.0),
    ]
    assert len(evidence.features) == 16
    # This model has no prior over questions: the prior is 1 and weighs nothing.
    assert evidence.features[-1] == FeatureEvidence(name="question_prior", value=1.0, weight=0.0, contribution=0.0)
    page = response.content.decode()
    assert '<p class="decision missing" id="sources-missing">Sources missing: no answer is given.</p>' in page
    assert "is below the threshold 0.5." in page
    assert '<tr class="feature-known">' in page
    assert 'id="citation-1"' not in page
    assert 'id="hit-1"' in page  # /search still lists its best (unrelated) passages


def test_a_language_model_refusal_is_shown_as_the_reason_sources_are_missing(client, staff, ingested, settings):
    for server in chat_server_run():
        settings.LLM_BASE_URL = server.url
        settings.LLM_MODEL = "test-model"
        server.behaviour.reply = NOT_IN_SOURCES

        response = client.get(ASK_PAGE, {"q": DOCUMENTED})

    inspection = response.context["inspection"]
    assert (inspection.ask.mode, inspection.ask.sources_missing, inspection.citations) == ("generative", True, [])
    assert (inspection.evidence.sources_missing, inspection.evidence.language_model_refused) == (True, True)
    assert inspection.evidence.probability == 0.982  # the evidence alone would have answered
    assert inspection.evidence.reason == (
        "The model's probability passed the threshold, but the language model said the passages do not answer."
    )
    assert 'id="sources-missing"' in response.content.decode()


@pytest.mark.parametrize(
    ("query", "field", "message"),
    [
        ({"q": ""}, "q", "This field is required."),
        ({"q": "x" * 501}, "q", "Ensure this value has at most 500 characters (it has 501)."),
        ({"q": "pool", "limit": "0"}, "limit", "Ensure this value is greater than or equal to 1."),
        ({"q": "pool", "limit": "51"}, "limit", "Ensure this value is less than or equal to 50."),
        (
            {"q": "pool", "repo": "acme/nope"},
            "repo",
            "Select a valid choice. acme/nope is not one of the available choices.",
        ),
    ],
)
def test_bad_input_is_a_400_page_naming_the_field(client, staff, query, field, message):
    RepositoryFactory(name="acme/handbook")

    response = client.get(ASK_PAGE, query)

    assert response.status_code == 400
    assert response.context["form"].errors == {field: [message]}
    assert "inspection" not in response.context


def test_progress_poll_answers_the_runs_progress(client, staff):
    run = IngestRunFactory(
        repository=RepositoryFactory(name="acme/handbook"),
        status=IngestStatus.RUNNING,
        phase="chunk_embed_write",
        files_total=12,
        files_processed=5,
        chunks_embedded=31,
        finished_at=None,
    )
    IngestRun.objects.filter(pk=run.pk).update(heartbeat_at=run.started_at.replace(year=2100))  # not stale

    response = client.get(f"/admin/console/ingest-runs/{run.pk}/progress/")

    assert response.status_code == 200
    assert response["Cache-Control"] == "max-age=0, no-cache, no-store, must-revalidate, private"
    body = response.json()
    assert {key: body[key] for key in ("id", "repo", "status", "phase", "error", "attempts")} == {
        "id": run.pk,
        "repo": "acme/handbook",
        "status": "running",
        "phase": "chunk_embed_write",
        "error": "",
        "attempts": 0,
    }
    assert body["files"] == {
        "total": 12,
        "processed": 5,
        "added": 0,
        "updated": 0,
        "removed": 0,
        "unchanged": 0,
        "skipped": [],
    }
    assert body["chunks"] == {"added": 0, "updated": 0, "removed": 0, "unchanged": 0, "embedded": 31}


def test_progress_poll_of_an_unknown_run_is_a_404_problem(client, staff):
    response = client.get("/admin/console/ingest-runs/999999/progress/")

    assert response.status_code == 404
    assert response.json()["detail"] == "No ingest run with id 999999."


@pytest.mark.parametrize("who", ["anonymous", "member"])
def test_progress_poll_refuses_anyone_but_staff_with_a_403_problem(client, django_user_model, who):
    run = IngestRunFactory()
    if who == "member":
        client.force_login(django_user_model.objects.create_user("member", password="pw-123456789"))

    response = client.get(f"/admin/console/ingest-runs/{run.pk}/progress/")

    assert response.status_code == 403
    assert response["Content-Type"] == "application/problem+json"
    assert response.json() == {
        "type": "urn:problem:forbidden",
        "title": "Forbidden",
        "status": 403,
        "detail": "A signed-in staff session is required.",
        "code": "forbidden",
    }


def test_run_page_polls_while_the_run_is_active(client, superuser):
    run = IngestRunFactory(status=IngestStatus.RUNNING, files_total=8, files_processed=3, finished_at=None)

    page = client.get(f"/admin/groundtruth/ingestrun/{run.pk}/change/").content.decode()

    assert (
        f'<div class="module" id="ingest-progress" data-url="/admin/console/ingest-runs/{run.pk}/progress/" '
        'data-status="running">'
    ) in page
    assert '<progress id="ingest-bar" max="8" value="3"></progress>' in page
    assert f'action="/admin/console/ingest-runs/{run.pk}/reingest/"' in page


def test_run_page_of_a_finished_run_shows_a_full_bar_and_the_counts(client, superuser):
    run = IngestRunFactory(files_total=4, files_processed=4, files_added=4, chunks_added=7)

    page = client.get(f"/admin/groundtruth/ingestrun/{run.pk}/change/").content.decode()

    assert 'data-status="succeeded"' in page
    assert '<progress id="ingest-bar" max="1" value="1"></progress>' in page
    assert "Files: 4 added, 0 updated, 0 removed, 0 unchanged. Chunks: 7 added, 0 updated, 0 removed" in page


def test_reingest_now_queues_a_run_of_the_repository_and_opens_its_page(
    client, superuser, ingested, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post(f"/admin/console/ingest-runs/{ingested.pk}/reingest/")

    new = IngestRun.objects.exclude(pk=ingested.pk).get()
    assert (new.repository.name, new.status, new.trigger, new.ref) == ("acme/handbook", "queued", "admin", "main")
    assert response.status_code == 302
    assert response["Location"] == f"/admin/groundtruth/ingestrun/{new.pk}/change/"
    assert len(callbacks) == 2  # the run's task and the brand-asset sync
    page = client.get(response["Location"])
    assert [str(message) for message in page.context["messages"]] == [f"acme/handbook: queued as run {new.pk} (queued)"]


def test_reingest_now_needs_a_post_and_staff(client, django_user_model, ingested):
    anonymous = client.post(f"/admin/console/ingest-runs/{ingested.pk}/reingest/")
    client.force_login(django_user_model.objects.create_superuser("admin", "admin@example.invalid", "pw-1234567"))
    by_get = client.get(f"/admin/console/ingest-runs/{ingested.pk}/reingest/")

    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/admin/login/")
    assert by_get.status_code == 405
    assert list(IngestRun.objects.values_list("pk", flat=True)) == [ingested.pk]
