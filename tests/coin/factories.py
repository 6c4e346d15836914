from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import factory

from coin.models import PricePoint, Wallet


class WalletFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Wallet

    address = factory.Sequence(lambda n: f"0x{n:040x}")
    balance = Decimal("10.00000000")


class PricePointFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = PricePoint

    timestamp = factory.Sequence(lambda n: datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=n))
    price = Decimal("1.00000000")
    supply = Decimal("1000000.00000000")
