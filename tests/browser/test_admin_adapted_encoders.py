"""Staff read the adapted encoders in the admin: when each was fitted, on how many mined queries,
how the base and the adapted model scored on the held-out mined queries, what the fit cost and
where its switch stands."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.urls import reverse

from groundtruth.models import AdaptationStatus, AdaptedEncoder

pytestmark = pytest.mark.django_db(transaction=True)


def test_staff_read_each_adapted_encoder_and_its_fit_in_the_admin(staff_browser):
    fields = {
        "index_version": 4,
        "base_model": "all-MiniLM-L6-v2",
        "repositories": ["Homebrew/brew", "psf/requests"],
        "chunk_count": 7324,
        "mined_query_count": 5159,
        "query_count": 1536,
        "held_out_query_count": 256,
        "held_out_accuracy_before": 0.582,
        "fit_seconds": 709.0,
        "peak_rss_mb": 1366.0,
        "staged_count": 7324,
    }
    retired = AdaptedEncoder.objects.create(
        status=AdaptationStatus.RETIRED,
        model_name="minilm-adapted@0768147d9609",
        directory="/srv/models/adapted/0768147d96092a51/minilm-adapted",
        held_out_accuracy=0.648,
        **fields,
    )
    active = AdaptedEncoder.objects.create(
        status=AdaptationStatus.ACTIVE,
        model_name="minilm-adapted@ae88c37f4516",
        directory="/srv/models/adapted/ae88c37f451645ba/minilm-adapted",
        held_out_accuracy=0.652,
        **fields,
    )
    AdaptedEncoder.objects.filter(pk=retired.pk).update(fitted_at=datetime(2026, 11, 25, 8, 5, tzinfo=UTC))
    AdaptedEncoder.objects.filter(pk=active.pk).update(fitted_at=datetime(2026, 11, 26, 11, 57, tzinfo=UTC))

    staff_browser.open(reverse("admin:groundtruth_adaptedencoder_changelist"))

    assert staff_browser.text("#content h1") == "Select adapted encoder to view"
    rows = [row.text for row in staff_browser.find_all("#result_list tbody tr")]
    assert len(rows) == 2
    assert rows[0].split()[:3] == [str(active.pk), "2026-11-26", "11:57"]
    assert rows[0].split()[3:] == [
        "active",
        "minilm-adapted@ae88c37f4516",
        "1536",
        "0.582",
        "→",
        "0.652",
        "11",
        "min",
        "49",
        "s,",
        "1,366",
        "MB",
        "7324",
    ]
    assert rows[1].split()[3:6] == ["retired", "minilm-adapted@0768147d9609", "1536"]
    # The list fits the window: no horizontal scrolling.
    assert staff_browser.driver.execute_script(
        "const list = document.querySelector('.results'); return list.scrollWidth <= list.clientWidth"
    )
    staff_browser.screenshot("admin-adapted-encoders")
    assert staff_browser.console_errors() == []

    staff_browser.open(reverse("admin:groundtruth_adaptedencoder_change", args=[active.pk]))
    assert staff_browser.text(".field-directory .readonly") == "/srv/models/adapted/ae88c37f451645ba/minilm-adapted"
    assert staff_browser.text(".field-held_out_accuracy .readonly") == "0.652"
    staff_browser.screenshot("admin-adapted-encoder", full_page=True)
