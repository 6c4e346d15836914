from django.apps import AppConfig


class CoinConfig(AppConfig):
    name = "coin"

    def ready(self) -> None:
        from agentplatform.plumbing.cache_generations import RESPONSES, bump_on_change
        from coin.models import PricePoint

        bump_on_change(RESPONSES, PricePoint)
