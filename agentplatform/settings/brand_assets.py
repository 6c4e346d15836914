"""Brand assets (brandassets/): the registry file and the serving of asset content."""

from __future__ import annotations

from agentplatform.settings.env import env, env_non_negative, env_positive_int

BRAND_ASSETS_PATH = env.str("BRAND_ASSETS_PATH", default="brand-assets.yml")
ASSET_CONTENT_CACHE_BYTES = env_non_negative("ASSET_CONTENT_CACHE_BYTES", 64 * 1024 * 1024)
ASSET_CONTENT_MAX_AGE_SECONDS = env_positive_int("ASSET_CONTENT_MAX_AGE_SECONDS", 300)
# How long a web worker keeps the asset row a content URL resolved to (seconds; 0: ask the
# database every time). A sync clears it in its own process; other workers follow within this.
ASSET_RECORD_CACHE_SECONDS = env_non_negative("ASSET_RECORD_CACHE_SECONDS", 5.0)
