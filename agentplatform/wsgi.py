import os

from django.core.wsgi import get_wsgi_application

from agentplatform.plumbing.chunked_bodies import ChunkedBodyMiddleware
from agentplatform.plumbing.database_backend.deadlines import ProcessKind, process_kind_set

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentplatform.settings")
# A client waits on every query: the short database deadlines (agentplatform/plumbing/database_backend/).
process_kind_set(ProcessKind.SERVING)
# Chunked request bodies get a length Django can read by (agentplatform/plumbing/chunked_bodies.py).
application = ChunkedBodyMiddleware(get_wsgi_application())
