"""The audit of questions: what /search and /ask record (key prefix, question, repositories,
sources missing), that a failing write never fails the answer, the purge after the retention,
and the admin's filters and most frequent unanswered questions."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.utils import timezone

from agents.models import ApiKey
from groundtruth.models import AskedQuestion
from groundtruth.question_audit import asked_questions_purge
from groundtruth.services import ASKED_QUESTIONS_PURGE_TASK_NAME, ingest_schedule_sync
from groundtruth.tasks import asked_questions_purge_task
from tests.adminpages import changelist_cells
from tests.groundtruth.factories import RepositoryFactory, bearer, service_key
from tests.groundtruth.search_fixtures import COMMUNITY, HANDBOOK, chunks_index

pytestmark = pytest.mark.django_db

LIST_URL = "/admin/groundtruth/askedquestion/"


@pytest.fixture
def indexed() -> None:
    chunks_index(RepositoryFactory(name="acme/handbook", trust="canonical"), HANDBOOK)
    chunks_index(RepositoryFactory(name="acme/community", trust="community"), COMMUNITY)
    RepositoryFactory(name="acme/empty")  # listed, nothing indexed: every search of it finds nothing


@pytest.fixture
def reader() -> tuple[str, str]:
    secret = service_key("read")
    return secret, ApiKey.objects.get().display_prefix


def recorded() -> list[tuple[str, str, str, list[str], bool]]:
    return list(
        AskedQuestion.objects.order_by("id").values_list(
            "key_prefix", "via", "question", "repositories", "sources_missing"
        )
    )


def test_search_records_the_key_prefix_question_repositories_and_whether_nothing_was_found(api_client, indexed, reader):
    secret, prefix = reader

    found = api_client.get("/search", {"q": "broker", "repo": "acme/handbook"}, **bearer(secret))
    nothing = api_client.get("/search", {"q": "broker", "repo": "acme/empty"}, **bearer(secret))

    assert (found.status_code, nothing.status_code) == (200, 200)
    assert nothing.json()["results"] == []
    assert recorded() == [
        (prefix, "search", "broker", ["acme/handbook"], False),
        (prefix, "search", "broker", ["acme/empty"], True),
    ]
    assert secret not in str(list(AskedQuestion.objects.values()))


def test_ask_records_sources_missing_as_the_answer_says_it(api_client, indexed, reader):
    secret, prefix = reader
    question = "How do I rotate the Kubernetes ingress certificates?"

    response = api_client.post(
        "/ask", {"question": question, "scope": {"repos": ["acme/community"]}}, format="json", **bearer(secret)
    )

    assert response.json()["sources_missing"] is True
    assert recorded() == [(prefix, "ask", question, ["acme/community"], True)]


def test_a_staff_session_is_recorded_by_its_username(admin_client, indexed):
    admin_client.get("/search", {"q": "broker"})

    assert [row[:3] for row in recorded()] == [("staff:admin", "search", "broker")]


def test_a_refused_search_records_nothing(api_client, indexed, reader):
    secret, _ = reader

    response = api_client.get("/search", {"q": "broker", "repo": "acme/nope"}, **bearer(secret))

    assert response.status_code == 400
    assert recorded() == []


def test_an_audit_write_that_fails_is_logged_and_the_answer_is_unchanged(api_client, indexed, reader, caplog):
    secret, prefix = reader
    before = api_client.get("/search", {"q": "broker"}, **bearer(secret))
    AskedQuestion.objects.all().delete()
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE FUNCTION audit_refuse() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'audit table refuses writes'; END $$"
        )
        cursor.execute(
            "CREATE TRIGGER audit_refuse BEFORE INSERT ON groundtruth_askedquestion "
            "FOR EACH ROW EXECUTE FUNCTION audit_refuse()"
        )

    with caplog.at_level(logging.ERROR, logger="groundtruth.question_audit"):
        after = api_client.get("/search", {"q": "broker"}, **bearer(secret))

    assert after.status_code == 200
    assert after.content == before.content
    assert [record.getMessage() for record in caplog.records] == [f"Question audit not written (search by {prefix})"]
    assert "audit table refuses writes" in caplog.records[0].exc_text
    assert AskedQuestion.objects.count() == 0  # and the request's transaction is still usable


def test_records_older_than_the_retention_are_purged(settings):
    settings.QUESTION_AUDIT_RETENTION_DAYS = 90
    now = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
    for days, question in [(91, "old"), (90, "on the day"), (89, "recent")]:
        AskedQuestion.objects.create(
            asked_at=now - timedelta(days=days, seconds=1 if question == "old" else 0),
            key_prefix="sk_000000000000",
            via="search",
            question=question,
            repositories=["acme/handbook"],
            sources_missing=False,
        )

    assert asked_questions_purge(now=now) == 1
    assert sorted(AskedQuestion.objects.values_list("question", flat=True)) == ["on the day", "recent"]


def test_the_purge_task_runs_daily_from_beat_and_purges(settings):
    settings.QUESTION_AUDIT_RETENTION_DAYS = 1
    AskedQuestion.objects.create(
        asked_at=timezone.now() - timedelta(days=2),
        key_prefix="sk_000000000000",
        via="ask",
        question="old",
        repositories=[],
        sources_missing=True,
    )
    from django_celery_beat.models import PeriodicTask

    ingest_schedule_sync()

    task = PeriodicTask.objects.get(name=ASKED_QUESTIONS_PURGE_TASK_NAME)
    assert (task.task, task.interval.every, task.interval.period) == (
        "groundtruth.tasks.asked_questions_purge_task",
        1,
        "days",
    )
    assert asked_questions_purge_task() == 1
    assert AskedQuestion.objects.count() == 0


@pytest.fixture
def audit() -> None:
    RepositoryFactory(name="acme/handbook")
    RepositoryFactory(name="acme/community")
    at = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
    rows = [
        ("sk_aaaaaaaaaaaa", "How do I rotate certificates?", ["acme/handbook"], True, 0),
        ("sk_bbbbbbbbbbbb", "HOW do I rotate certificates?", ["acme/handbook"], True, 1),
        ("sk_aaaaaaaaaaaa", "Where is the broker?", ["acme/handbook", "acme/community"], False, 2),
        ("sk_bbbbbbbbbbbb", "Who pays the gas?", ["acme/handbook", "acme/community"], True, 3),
        ("sk_aaaaaaaaaaaa", "Where are the forum rules?", ["acme/community"], True, 4),
    ]
    for prefix, question, repositories, missing, minutes in rows:
        AskedQuestion.objects.create(
            asked_at=at + timedelta(minutes=minutes),
            key_prefix=prefix,
            via="ask",
            question=question,
            repositories=repositories,
            sources_missing=missing,
        )


@pytest.mark.parametrize(
    ("query", "questions"),
    [
        (
            {},
            [
                "Where are the forum rules?",
                "Who pays the gas?",
                "Where is the broker?",
                "HOW do I rotate certificates?",
                "How do I rotate certificates?",
            ],
        ),
        ({"key": "sk_bbbbbbbbbbbb"}, ["Who pays the gas?", "HOW do I rotate certificates?"]),
        ({"repository": "acme/community"}, ["Where are the forum rules?", "Who pays the gas?", "Where is the broker?"]),
        ({"sources_missing__exact": "0"}, ["Where is the broker?"]),
        (
            {"key": "sk_aaaaaaaaaaaa", "repository": "acme/handbook", "sources_missing__exact": "1"},
            ["How do I rotate certificates?"],
        ),
    ],
)
def test_the_admin_lists_records_filtered_by_key_repository_and_sources_missing(admin_client, audit, query, questions):
    response = admin_client.get(LIST_URL, query)

    assert response.status_code == 200
    assert [row[3] for row in changelist_cells(response)] == questions


def test_the_admin_shows_the_most_frequent_unanswered_questions_per_repository(admin_client, audit):
    page = admin_client.get(LIST_URL).content.decode()

    table = page[
        page.index('<table id="unanswered-questions">') : page.index("</table>", page.index("unanswered-questions"))
    ]
    rows = [
        [cell.split(">", 1)[1] for cell in row.split("<td")[1:]] for row in table.split("<tbody>")[1].split("<tr>")[1:]
    ]
    cells = [[cell.removesuffix("</td>").split("</td>")[0] for cell in row] for row in rows]
    assert cells == [
        ["acme/community", "Where are the forum rules?", "1", "2026-06-01 12:04"],
        ["acme/community", "Who pays the gas?", "1", "2026-06-01 12:03"],
        ["acme/handbook", "HOW do I rotate certificates?", "2", "2026-06-01 12:01"],
        ["acme/handbook", "Who pays the gas?", "1", "2026-06-01 12:03"],
    ]
