"""The shared plumbing every app uses, apart from the wiring that assembles the project.

Problem details and the error hierarchy, bearer authentication and permission classes, rate
limits, the caches and their generations, request body and query rules, generic serializer fields,
renderers, money and wallet-address rules, the database backend with its deadlines, the admin's
date formats. None of it imports an app (`agents`, `coin`, `chat`, `groundtruth`, `brandassets`),
not even inside a function (tests/platform/test_plumbing_imports.py walks every module); where it
needs an app's code it names it in a setting (CREDENTIAL_VERIFIER, API_PATH_PREFIXES_FUNCTION) that the
wiring fills in.

It lives inside `agentplatform/` rather than beside it because the top-level layout is fixed
(the project package and the apps): `agentplatform/` is then two things, told apart by folder
rather than by name. Its modules (settings, urls, celery, wsgi/asgi, gunicorn, demo data, the
MCP app, health and landing pages, admin site) are the wiring: they import the apps and this
package; this package imports neither.
"""
