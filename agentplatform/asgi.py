import os

from django.core.asgi import get_asgi_application

from agentplatform.plumbing.database_backend.deadlines import ProcessKind, process_kind_set

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentplatform.settings")
# The chat stream process: a client waits on every query (agentplatform/plumbing/database_backend/).
process_kind_set(ProcessKind.SERVING)
application = get_asgi_application()
