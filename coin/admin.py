"""Wallets and price points, read-only: balances and prices come from the platform, not the back office.
The price point list (and the coin app page) draw the price history as a chart. Amounts show 2
decimals, prices the token's precision."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest

from agentplatform.plumbing.money import money_text
from coin.charts import price_text
from coin.models import PricePoint, Wallet


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Wallet)
class WalletAdmin(ReadOnlyAdmin):
    list_display = ["address", "balance_display", "updated_at"]
    search_fields = ["address"]
    ordering = ["-balance"]

    @admin.display(description="balance", ordering="balance")
    def balance_display(self, wallet: Wallet) -> str:
        return money_text(wallet.balance)

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Wallet], search_term: str
    ) -> tuple[QuerySet[Wallet], bool]:
        # Addresses are stored lower-case; staff often paste the checksummed form.
        return super().get_search_results(request, queryset, search_term.lower())


@admin.register(PricePoint)
class PricePointAdmin(ReadOnlyAdmin):
    change_list_template = "admin/coin/pricepoint/change_list.html"
    list_display = ["timestamp", "price_display", "supply_display", "market_cap_display"]
    date_hierarchy = "timestamp"
    ordering = ["-timestamp"]

    @admin.display(description="price", ordering="price")
    def price_display(self, point: PricePoint) -> str:
        return price_text(point.price)

    @admin.display(description="supply", ordering="supply")
    def supply_display(self, point: PricePoint) -> str:
        return money_text(point.supply, places=0)

    @admin.display(description="market cap")
    def market_cap_display(self, point: PricePoint) -> str:
        return money_text(point.market_cap)
