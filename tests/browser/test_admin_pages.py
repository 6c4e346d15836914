"""The admin's pages in Chromium at 1400x900, with the rows a fresh `make run` shows (the demo
platform data) and ground-truth rows like the demo sources': every list fits the window, and the
pages issue 13 found rough read as a person expects. Screenshots: var/screenshots/admin-*.png."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from agentplatform.demo.platform import demo_platform_seed
from agentplatform.plumbing.admin_display import moment_text
from agentplatform.plumbing.money import money_text
from agents.models import Agent, ApiKey
from chat.models import ChatMessage, MessageType
from groundtruth.ingest.index_text import INDEX_VERSION
from groundtruth.models import IngestStatus, Registry, Repository
from tests.agents.factories import wallet_session_for
from tests.groundtruth.factories import IngestRunFactory
from tests.groundtruth.search_fixtures import Section, chunks_index

HANDBOOK_COMMIT = "4f1c2a9e8b7d6c5f4e3d2c1b0a9f8e7d6c5b4a39"
LONG_ERROR = (
    "GitError: fetching https://git.example.com/demo/service-config.git failed: fatal: unable to access "
    "'https://git.example.com/demo/service-config.git/': Could not resolve host: git.example.com"
)


@pytest.fixture
def platform_rows(staff_browser):
    """The demo platform (agents, 90 days of prices, wallets, chat, keys) and a wallet session."""
    demo = demo_platform_seed(now=timezone.now())
    wallet_session_for(demo.user_wallet_address)
    return demo


@pytest.fixture
def ground_truth_rows(staff_browser):
    """A registry with three repositories, their runs (succeeded, failed, running) and indexed chunks."""
    now = timezone.now()
    registry = Registry.objects.create(
        location="/work/main/var/demo-sources/registry@main:sources.yml",
        commit="9" * 40,
        content="repositories: []\n",
        loaded_at=now,
    )
    handbook = Repository.objects.create(
        registry=registry,
        name="demo/platform-handbook",
        url="/work/main/var/demo-sources/platform-handbook",
        trust="canonical",
        owners=["docs-team", "platform-team"],
        include=["docs/**/*.md", "README.md"],
        exclude=["docs/drafts/**"],
        last_commit=HANDBOOK_COMMIT,
        last_ingested_at=now - timedelta(minutes=5),
        index_version=INDEX_VERSION,
        file_count=2,
        chunk_count=3,
    )
    config = Repository.objects.create(
        registry=registry,
        name="demo/service-config",
        url="https://git.example.com/demo/service-config.git",
        trust="reviewed",
        owners=["sre"],
        include=["**/*.{yml,yaml,toml,json}"],
    )
    Repository.objects.create(
        registry=registry,
        name="demo/meeting-transcripts",
        url="/work/main/var/demo-sources/meeting-transcripts",
        trust="transcript",
        is_transcript=True,
        enabled=False,
    )
    finished = now - timedelta(minutes=5)
    succeeded = IngestRunFactory(
        repository=handbook,
        commit=HANDBOOK_COMMIT,
        trigger="command",
        files_total=3,
        files_processed=2,
        files_added=2,
        chunks_added=3,
        chunks_embedded=3,
        files_skipped=[["docs/diagram.png", "not a text file"]],
        timings={"fetch": 0.412, "select": 0.008, "chunk_embed_write": 2.731, "swap": 0.052, "total": 3.203},
        started_at=finished - timedelta(seconds=3.4),
        heartbeat_at=finished,
        finished_at=finished,
    )
    IngestRunFactory(
        repository=config,
        commit="",
        status=IngestStatus.FAILED,
        trigger="beat",
        phase="fetch",
        error=LONG_ERROR,
        started_at=finished - timedelta(seconds=75),
        finished_at=finished,
    )
    IngestRunFactory(
        repository=handbook,
        status=IngestStatus.RUNNING,
        trigger="admin",
        phase="chunk_embed_write",
        files_total=3,
        files_processed=1,
        started_at=now,
        finished_at=None,
    )
    chunks_index(
        handbook,
        [
            Section("docs/configure.md", ("Configure", "Broker"), "Set CELERY_BROKER_URL to the Redis URL.", 3),
            Section("docs/configure.md", ("Configure", "Cache"), "REDIS_URL names the cache.", 9),
            Section("README.md", ("Platform handbook",), "How the platform is run.", 1),
        ],
    )
    return {"handbook": handbook, "config": config, "succeeded": succeeded}


CHANGE_LISTS = [
    "agents_agent",
    "agents_apikey",
    "agents_walletsession",
    "chat_chatmessage",
    "coin_wallet",
    "coin_pricepoint",
    "groundtruth_registry",
    "groundtruth_repository",
    "groundtruth_ingestrun",
    "groundtruth_chunk",
]


def test_every_change_list_fits_a_1400_pixel_window(staff_browser, platform_rows, ground_truth_rows):
    too_wide = {}
    for name in CHANGE_LISTS:
        staff_browser.open(reverse(f"admin:{name}_changelist"))
        assert staff_browser.find_all("#result_list tbody tr"), f"{name}: no rows to measure"
        overflow = max(
            staff_browser.horizontal_overflow("#changelist .results"), staff_browser.horizontal_overflow("html")
        )
        if overflow:
            too_wide[name] = overflow
        staff_browser.screenshot(f"admin-list-{name}")

    assert too_wide == {}
    assert staff_browser.console_errors() == []


def test_agent_page_shows_finances_at_two_decimals_the_token_chart_and_edits_tags_as_text(staff_browser, platform_rows):
    agent = Agent.objects.get(instance_id="atlas-trader")
    staff_browser.open(reverse("admin:agents_agent_change", args=[agent.pk]))

    assert staff_browser.text(".field-balance_display .readonly") == money_text(agent.balance)
    assert len(staff_browser.text(".field-balance_display .readonly").rpartition(".")[2]) == 2
    assert staff_browser.text("#token-price h2") == "Token price"
    assert staff_browser.text("#token-price figcaption").startswith("Price, last 30 days (")
    assert len(staff_browser.find_all("#token-price svg polyline.price-line")) == 1
    assert staff_browser.find("#id_tags").get_attribute("value") == ", ".join(agent.tags)
    staff_browser.screenshot("admin-agent-change", full_page=True)

    staff_browser.fill("#id_tags", "trading, arbitrage,  trading")
    staff_browser.submit("input[name=_continue]")

    agent.refresh_from_db()
    assert agent.tags == ["trading", "arbitrage"]
    assert staff_browser.find("#id_tags").get_attribute("value") == "trading, arbitrage"
    assert staff_browser.console_errors() == []


def test_repository_leads_to_its_runs_and_a_run_to_its_chunks(staff_browser, ground_truth_rows):
    handbook, succeeded = ground_truth_rows["handbook"], ground_truth_rows["succeeded"]
    staff_browser.open(reverse("admin:groundtruth_repository_changelist"))
    assert staff_browser.text("#content h1") == "Select repository to view"
    assert staff_browser.find_all("select[name=action] option[value=delete_selected]") == []

    staff_browser.find(f"#result_list a[href*='/repository/{handbook.pk}/change/']").click()
    assert staff_browser.texts(".field-include_list li") == ["docs/**/*.md", "README.md"]
    assert staff_browser.texts(".field-owners_list li") == ["docs-team", "platform-team"]
    assert staff_browser.find_all(".deletelink") == []
    staff_browser.screenshot("admin-repository-change", full_page=True)

    staff_browser.find(".field-runs_link a").click()
    assert (
        staff_browser.path
        == reverse("admin:groundtruth_ingestrun_changelist") + f"?repository__id__exact={handbook.pk}"
    )
    assert staff_browser.texts("#result_list td.field-status_and_phase") == [
        "running (chunk, embed, write)",
        "succeeded",
    ]

    staff_browser.find(f"#result_list a[href*='/ingestrun/{succeeded.pk}/change/']").click()
    assert staff_browser.text("#content h2") == f"demo/platform-handbook run #{succeeded.pk} (succeeded)"
    assert staff_browser.text(".field-took .readonly") == "3.4 s"
    assert staff_browser.text(".field-phase_timings .readonly") == (
        "fetch 412 ms · select 8 ms · chunk, embed, write 2.7 s · swap 52 ms · total 3.2 s"
    )
    assert staff_browser.texts(".field-files_skipped_list li") == ["docs/diagram.png: not a text file"]
    staff_browser.screenshot("admin-ingestrun-change", full_page=True)

    staff_browser.find(".field-chunks_link a").click()
    assert staff_browser.texts("#result_list td.field-path") == ["README.md", "docs/configure.md", "docs/configure.md"]
    assert staff_browser.texts("#result_list td.field-lines") == ["1-1", "3-3", "9-9"]
    staff_browser.screenshot("admin-chunks-of-repository")
    assert staff_browser.console_errors() == []


def test_staff_post_a_system_message_from_a_form_that_says_what_it_does(staff_browser):
    staff_browser.open(reverse("admin:chat_chatmessage_changelist"))
    staff_browser.find(".object-tools a.addlink").click()

    assert staff_browser.text("#content h1") == "Post a system message"
    assert staff_browser.text(".field-message .help").startswith(
        "Posted to the chat feed at once as a system message from “System” (no agent)"
    )
    assert [button.get_attribute("value") for button in staff_browser.find_all(".submit-row input")] == [
        "Post to the feed"
    ]
    staff_browser.screenshot("admin-chat-add")

    staff_browser.fill("#id_message", "Maintenance at 18:00 UTC")
    staff_browser.submit(".submit-row input[name=_save]")

    assert staff_browser.texts("#result_list td.field-sender") == ["System"]
    assert staff_browser.texts("#result_list td.field-short_message") == ["Maintenance at 18:00 UTC"]
    message = ChatMessage.objects.get()
    assert (message.agent, message.message_type) == (None, MessageType.SYSTEM)
    staff_browser.screenshot("admin-chat-list-after-post")


def test_api_key_page_reads_its_scopes_as_text(staff_browser, platform_rows):
    key = ApiKey.objects.get(name="demo service key")
    staff_browser.open(reverse("admin:agents_apikey_change", args=[key.pk]))

    assert staff_browser.text(".field-scope_list .readonly") == "ingest, read"
    staff_browser.screenshot("admin-apikey-change")


def test_index_key_list_and_key_page_read_as_words_with_one_moment_format(staff_browser, platform_rows):
    staff_browser.open(reverse("admin:index"))
    assert [
        name for name in staff_browser.texts("#content-main caption") if name in ("GROUND TRUTH", "BRAND ASSETS")
    ] == [
        "BRAND ASSETS",
        "GROUND TRUTH",
    ]  # the admin's CSS writes captions in capitals; the words are "Ground truth", "Brand assets"
    assert staff_browser.text("tr.model-repository a.viewlink") == "View"
    assert staff_browser.find_all("tr.model-repository a.changelink") == []
    staff_browser.screenshot("admin-index", full_page=True)

    key = ApiKey.objects.get(name="demo service key")
    ApiKey.objects.filter(pk=key.pk).update(
        revoked_at=timezone.now().replace(year=2026, month=1, day=26, hour=8, minute=14)
    )
    staff_browser.open(reverse("admin:agents_apikey_changelist") + "?q=demo+service+key")
    [row] = staff_browser.find_all("#result_list tbody tr")
    created = moment_text(key.created_at)
    assert row.find_element("css selector", ".field-prefix").text == key.display_prefix
    assert row.find_element("css selector", ".field-revocation").text == "revoked 2026-01-26 08:14"
    assert row.find_element("css selector", ".field-created").text == created
    staff_browser.screenshot("admin-list-apikeys-revoked")

    staff_browser.open(reverse("admin:agents_apikey_change", args=[key.pk]))
    assert staff_browser.text("#content h2") == f"demo service key (service, {key.display_prefix})"
    assert staff_browser.text(".field-prefix .readonly") == key.display_prefix
    assert staff_browser.text(".field-created_at .readonly") == created
    assert staff_browser.text(".field-revoked_at .readonly") == "2026-01-26 08:14"
    staff_browser.screenshot("admin-apikey-change-revoked")
    assert staff_browser.console_errors() == []


def test_a_run_that_changed_nothing_says_so_beside_its_full_bar(staff_browser, ground_truth_rows):
    run = IngestRunFactory(
        repository=ground_truth_rows["handbook"], commit=HANDBOOK_COMMIT, files_total=4, files_unchanged=4
    )
    staff_browser.open(reverse("admin:groundtruth_ingestrun_change", args=[run.pk]))

    assert staff_browser.text("#ingest-files") == "no change: 4 files unchanged"
    bar = staff_browser.find("#ingest-bar")
    assert (bar.get_attribute("value"), bar.get_attribute("max")) == ("1", "1")
    staff_browser.screenshot("admin-ingestrun-no-change", full_page=True)
    assert staff_browser.console_errors() == []
