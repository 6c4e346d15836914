"""The platform token: wallets holding it and its price history."""

from __future__ import annotations

from decimal import Decimal

from django.db import models
from django.db.models import Q

from agentplatform.plumbing.money import MONEY


class Wallet(models.Model):
    """A wallet's token balance. An address without a row holds 0 tokens."""

    address = models.CharField(max_length=42, unique=True, help_text="Lower-case 0x address.")
    balance = models.DecimalField(**MONEY, default=Decimal("0"))
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["address"]
        constraints = [
            models.CheckConstraint(name="wallet_address_lower_hex", condition=Q(address__regex=r"^0x[0-9a-f]{40}$")),
            models.CheckConstraint(name="wallet_balance_not_negative", condition=Q(balance__gte=0)),
        ]

    def __str__(self) -> str:
        return self.address


class PricePoint(models.Model):
    """The token's price and supply at one moment; market cap is price x supply."""

    timestamp = models.DateTimeField(unique=True)
    price = models.DecimalField(**MONEY)
    supply = models.DecimalField(**MONEY)

    class Meta:
        ordering = ["-timestamp"]
        constraints = [
            # A positive price keeps price_change_percent defined (it divides by the first price).
            models.CheckConstraint(name="price_point_price_positive", condition=Q(price__gt=0)),
            models.CheckConstraint(name="price_point_supply_not_negative", condition=Q(supply__gte=0)),
        ]

    def __str__(self) -> str:
        return f"{self.price} at {self.timestamp:%Y-%m-%d %H:%M}"

    @property
    def market_cap(self) -> Decimal:
        return self.price * self.supply
