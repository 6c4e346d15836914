"""Settings of the agent platform and ground-truth service, one module per concern.

`env.py` reads the environment (and `.env`), and only it: every other module asks its typed
readers, which raise ImproperlyConfigured naming the variable. The modules below are imported in
order; a module that needs an earlier one's value imports it by name (VAR_DIR from core, REDIS_URL
from cache). What each setting means is in docs/configuration.md; the comments here say why.
Parameters produced by a fit are not settings: groundtruth/search/fitted/.
"""

# In the order of their dependencies (isort would sort them by name).
# isort: off
from agentplatform.settings.core import *  # noqa: F403
from agentplatform.settings.database import *  # noqa: F403
from agentplatform.settings.cache import *  # noqa: F403
from agentplatform.settings.security import *  # noqa: F403
from agentplatform.settings.rate_limits import *  # noqa: F403
from agentplatform.settings.api import *  # noqa: F403
from agentplatform.settings.chat import *  # noqa: F403
from agentplatform.settings.mcp import *  # noqa: F403
from agentplatform.settings.ingest import *  # noqa: F403
from agentplatform.settings.brand_assets import *  # noqa: F403
from agentplatform.settings.inference import *  # noqa: F403
from agentplatform.settings.search import *  # noqa: F403
from agentplatform.settings.health import *  # noqa: F403
from agentplatform.settings.celery import *  # noqa: F403
from agentplatform.settings.logging import *  # noqa: F403
# isort: on
