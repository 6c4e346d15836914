import os

from django.core.wsgi import get_wsgi_application

from agentplatform.chunked_bodies import ChunkedBodyMiddleware

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentplatform.settings")
# Chunked request bodies get a length Django can read by (agentplatform/chunked_bodies.py).
application = ChunkedBodyMiddleware(get_wsgi_application())
