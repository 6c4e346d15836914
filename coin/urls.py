from django.conf import settings
from rest_framework.routers import SimpleRouter

from coin.views import CoinViewSet

# /api/<COIN_SEGMENT>/balance and /api/<COIN_SEGMENT>/history: the segment is the deployment's
# token name (COIN_SEGMENT, default `wisent`: one deployment serves one token), so the route
# is built from the setting.
router = SimpleRouter(trailing_slash=False)
router.register(settings.COIN_SEGMENT, CoinViewSet, basename="coin")

urlpatterns = router.urls
