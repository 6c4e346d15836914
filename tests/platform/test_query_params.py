"""query_validated(remember=True): a valid query string is validated once, a refused one every time."""

from __future__ import annotations

import pytest
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from agentplatform.plumbing.query_params import QueryIntegerField, query_validated


class CountingQuerySerializer(serializers.Serializer):
    runs = 0

    limit = QueryIntegerField(min_value=1, max_value=10)

    def validate(self, attrs: dict) -> dict:
        CountingQuerySerializer.runs += 1
        return attrs


def get(query: str) -> Request:
    return Request(APIRequestFactory().get(f"/anything?{query}"))


@pytest.fixture(autouse=True)
def _fresh_count():
    CountingQuerySerializer.runs = 0


def test_a_remembered_query_string_is_validated_once_and_each_caller_gets_its_own_copy():
    first = query_validated(CountingQuerySerializer, get("limit=5"), remember=True)
    first["limit"] = 99
    second = query_validated(CountingQuerySerializer, get("limit=5"), remember=True)

    assert second == {"limit": 5}
    assert CountingQuerySerializer.runs == 1


def test_a_refused_query_string_is_refused_every_time():
    for _ in range(2):
        with pytest.raises(ValidationError):
            query_validated(CountingQuerySerializer, get("limit=50"), remember=True)

    assert query_validated(CountingQuerySerializer, get("limit=7"), remember=True) == {"limit": 7}


def test_without_remember_every_call_validates():
    for _ in range(2):
        assert query_validated(CountingQuerySerializer, get("limit=3")) == {"limit": 3}

    assert CountingQuerySerializer.runs == 2
