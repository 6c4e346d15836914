"""Where repository URLs may point, and who gets the git token: the defaults refuse.

Local paths only under GIT_LOCAL_ROOTS, no loopback, link-local or private http(s) hosts unless
GIT_ALLOW_PRIVATE_HOSTS allows them, the token only to GIT_HTTP_TOKEN_HOSTS. The same rule for
sources.yml and brand-assets.yml (errors name the line) and again right before every fetch.
The tests' own allowances (tests/conftest.py) are replaced here by what each test states.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from brandassets.registry import registry_parse as brand_registry_parse
from groundtruth.ingest.git_access import GitError, GitRepository
from groundtruth.models import Registry, Repository
from groundtruth.registry import registry_parse
from groundtruth.registry_files import RegistryInvalid
from groundtruth.services import registry_load
from tests.gitrepos import GitWorkTree
from tests.gitserver import GitHttpServer, served_bare_clone
from tests.localhttp import LocalHttpServer

BASE_DIR = Path(django_settings.BASE_DIR)
TOKEN = "tok_5e4d3c2b1a09f8e7d6c5"
PRIVATE_NETWORK_HINT = "a repository on a private network needs GIT_ALLOW_PRIVATE_HOSTS to name its host or network"


@pytest.fixture
def roots(settings, tmp_path: Path) -> Path:
    """The defaults, but for one local root of the test's own: no private hosts, no token hosts."""
    root = tmp_path / "sources"
    root.mkdir()
    settings.GIT_LOCAL_ROOTS = [root]
    settings.GIT_ALLOW_PRIVATE_HOSTS = []
    settings.GIT_HTTP_TOKEN = ""
    settings.GIT_HTTP_TOKEN_HOSTS = []
    settings.GIT_CACHE_DIR = tmp_path / "git-cache"
    return root


@pytest.fixture
def served(tmp_path: Path, roots: Path):
    """A git server on 127.0.0.1 that needs no token and records every request's headers."""
    tree = GitWorkTree.create(roots / "docs")
    tree.write("docs/index.md", "# Docs\n")
    tree.commit("docs")
    with GitHttpServer(project_root=tmp_path / "served") as server:
        served_bare_clone(tree.path, server.project_root, "acme/docs.git")
        yield server


def start_up(environment: dict[str, str], print_settings: str = "") -> subprocess.CompletedProcess:
    """Loads the settings in a fresh process with `environment` over a clean git configuration."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update({"DATABASE_URL": "sqlite:///:memory:", "DJANGO_SETTINGS_MODULE": "agentplatform.settings"})
    env.update(environment)
    script = "import django, json; django.setup(); from django.conf import settings; " + print_settings
    return subprocess.run(
        [sys.executable, "-c", script], cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=120
    )


# --- defaults and start-up ----------------------------------------------------------------------


def test_defaults_allow_local_repositories_only_in_the_demo_directory_and_no_private_hosts(tmp_path):
    result = start_up(
        {"VAR_DIR": str(tmp_path / "var")},
        "print(json.dumps([[str(root) for root in settings.GIT_LOCAL_ROOTS], settings.GIT_ALLOW_PRIVATE_HOSTS, "
        "settings.GIT_HTTP_TOKEN_HOSTS]))",
    )

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == [[str((tmp_path / "var" / "demo-sources").resolve())], [], []]


def test_a_token_without_a_host_list_stops_start_up_naming_the_variable(tmp_path):
    result = start_up({"VAR_DIR": str(tmp_path), "GIT_HTTP_TOKEN": TOKEN})

    assert result.returncode == 1
    assert (
        "ImproperlyConfigured: GIT_HTTP_TOKEN is set but GIT_HTTP_TOKEN_HOSTS is empty: list the hosts that may "
        "receive the token (comma separated, e.g. GIT_HTTP_TOKEN_HOSTS=github.com)"
    ) in result.stderr
    assert TOKEN not in result.stderr


def test_configured_lists_are_read_and_bad_entries_stop_start_up_naming_the_variable(tmp_path):
    configured = start_up(
        {
            "VAR_DIR": str(tmp_path),
            "GIT_HTTP_TOKEN": TOKEN,
            "GIT_HTTP_TOKEN_HOSTS": "GitHub.com, git.example.com",
            "GIT_LOCAL_ROOTS": f"{tmp_path}/a,{tmp_path}/b",
            "GIT_ALLOW_PRIVATE_HOSTS": "git.internal,10.0.0.0/8",
        },
        "print(json.dumps([settings.GIT_HTTP_TOKEN_HOSTS, [str(root) for root in settings.GIT_LOCAL_ROOTS], "
        "settings.GIT_ALLOW_PRIVATE_HOSTS]))",
    )
    assert configured.returncode == 0, configured.stderr
    assert json.loads(configured.stdout) == [
        ["github.com", "git.example.com"],
        [str(tmp_path.resolve() / "a"), str(tmp_path.resolve() / "b")],
        ["git.internal", "10.0.0.0/8"],
    ]

    no_local = start_up({"VAR_DIR": str(tmp_path), "GIT_LOCAL_ROOTS": "none"}, "print(settings.GIT_LOCAL_ROOTS)")
    assert (no_local.returncode, no_local.stdout) == (0, "[]\n")

    with_port = start_up(
        {"VAR_DIR": str(tmp_path), "GIT_HTTP_TOKEN": TOKEN, "GIT_HTTP_TOKEN_HOSTS": "https://github.com:443"}
    )
    assert with_port.returncode == 1
    assert (
        "ImproperlyConfigured: GIT_HTTP_TOKEN_HOSTS must list host names or IP addresses, comma separated, "
        "without scheme, port or path; got 'https://github.com:443'"
    ) in with_port.stderr

    bad_network = start_up({"VAR_DIR": str(tmp_path), "GIT_ALLOW_PRIVATE_HOSTS": "10.0.0.0/33"})
    assert bad_network.returncode == 1
    assert (
        "ImproperlyConfigured: GIT_ALLOW_PRIVATE_HOSTS must list host names or IP addresses or networks "
        "(10.0.0.0/8), comma separated, without scheme, port or path; got '10.0.0.0/33'"
    ) in bad_network.stderr


# --- the registry files ---------------------------------------------------------------------------


def test_sources_yml_refuses_private_hosts_and_paths_outside_the_roots_naming_the_line(roots):
    text = (
        "defaults:\n  include: ['*.md']\nrepos:\n"
        "  - name: acme/loopback\n    url: http://127.0.0.1:8199/evil.git\n"
        "  - name: acme/metadata\n    url: http://169.254.169.254/latest/meta-data.git\n"
        "  - name: acme/office\n    url: https://10.1.2.3/acme/x.git\n"
        "  - name: acme/named\n    url: http://localhost:8199/evil.git\n"
        "  - name: acme/mapped\n    url: 'http://[::ffff:192.168.0.9]/x.git'\n"
        f"  - name: acme/server\n    url: {BASE_DIR}\n"
        "  - name: acme/etc\n    url: file:///etc\n"
        "  - name: acme/escape\n    url: ../../outside\n"
        f"  - name: acme/fine\n    url: {roots}/docs\n"
        "  - name: acme/public\n    url: https://140.82.112.3/acme/public.git\n"
    )

    with pytest.raises(RegistryInvalid) as caught:
        registry_parse(content=text, filename="sources.yml", base_dir=roots)

    assert caught.value.errors == [
        f"sources.yml:5: repos[0].url: host 127.0.0.1 is a loopback address; {PRIVATE_NETWORK_HINT}",
        f"sources.yml:7: repos[1].url: host 169.254.169.254 is a link-local address; {PRIVATE_NETWORK_HINT}",
        f"sources.yml:9: repos[2].url: host 10.1.2.3 is a private address; {PRIVATE_NETWORK_HINT}",
        f"sources.yml:11: repos[3].url: host localhost resolves to 127.0.0.1, a loopback address; "
        f"{PRIVATE_NETWORK_HINT}",
        f"sources.yml:13: repos[4].url: host ::ffff:192.168.0.9 is a private address; {PRIVATE_NETWORK_HINT}",
        f"sources.yml:15: repos[5].url: local path {BASE_DIR} is outside GIT_LOCAL_ROOTS ({roots})",
        f"sources.yml:17: repos[6].url: local path /etc is outside GIT_LOCAL_ROOTS ({roots})",
        f"sources.yml:19: repos[7].url: local path {roots.parent.parent / 'outside'} is outside GIT_LOCAL_ROOTS "
        f"({roots})",
    ]


def test_configured_private_hosts_and_roots_are_allowed(roots, settings, tmp_path):
    settings.GIT_ALLOW_PRIVATE_HOSTS = ["10.0.0.0/8", "localhost", "169.254.169.254"]
    settings.GIT_LOCAL_ROOTS = [roots, tmp_path / "more"]
    text = (
        "defaults:\n  include: ['*.md']\nrepos:\n"
        "  - name: acme/office\n    url: https://10.1.2.3/acme/x.git\n"
        "  - name: acme/named\n    url: http://localhost:8199/x.git\n"
        "  - name: acme/metadata\n    url: http://169.254.169.254/x.git\n"
        f"  - name: acme/more\n    url: {tmp_path}/more/x\n"
        "  - name: acme/relative\n    url: docs\n"
    )

    parsed = registry_parse(content=text, filename="sources.yml", base_dir=roots)

    assert [spec.url for spec in parsed.repositories] == [
        "https://10.1.2.3/acme/x.git",
        "http://localhost:8199/x.git",
        "http://169.254.169.254/x.git",
        str(tmp_path.resolve() / "more" / "x"),
        str(roots.resolve() / "docs"),
    ]


def test_no_local_roots_refuse_every_local_path(roots, settings):
    settings.GIT_LOCAL_ROOTS = []

    with pytest.raises(RegistryInvalid) as caught:
        registry_parse(content=f"repos:\n  - name: a/b\n    url: {roots}\n    include: ['*.md']\n", filename="s.yml")

    assert caught.value.errors == [
        f"s.yml:3: repos[0].url: local path {roots.resolve()} refused: local repositories are off "
        "(GIT_LOCAL_ROOTS is none)"
    ]


def test_brand_assets_yml_follows_the_same_rule_naming_the_line(roots):
    text = (
        "repos:\n"
        "  acme/brand: {url: 'http://10.0.0.7/brand.git'}\n"
        f"  acme/server: {{url: '{BASE_DIR}'}}\n"
        "  acme/named:\n"
        "    url: http://localhost/brand.git\n"
        f"  acme/fine: {{url: '{roots}/brand'}}\n"
        "products: {}\n"
    )

    with pytest.raises(RegistryInvalid) as caught:
        brand_registry_parse(text=text, base_dir=roots)

    assert caught.value.errors == [
        f"brand-assets.yml:2: repos.acme/brand.url: host 10.0.0.7 is a private address; {PRIVATE_NETWORK_HINT}",
        f"brand-assets.yml:3: repos.acme/server.url: local path {BASE_DIR} is outside GIT_LOCAL_ROOTS ({roots})",
        "brand-assets.yml:5: repos.acme/named.url: host localhost resolves to 127.0.0.1, a loopback address; "
        f"{PRIVATE_NETWORK_HINT}",
    ]


@pytest.mark.django_db
def test_a_registry_listing_the_servers_own_source_is_refused_and_nothing_is_registered(roots, settings):
    registry = GitWorkTree.create(roots / "registry")
    registry.write("sources.yml", f"repos:\n  - name: acme/server\n    url: {BASE_DIR}\n    include: ['**/*.py']\n")
    registry.commit("list the server")
    settings.SOURCE_REGISTRY_REPO = str(registry.path)

    with pytest.raises(RegistryInvalid) as caught:
        registry_load()

    error = f"sources.yml:3: repos[0].url: local path {BASE_DIR} is outside GIT_LOCAL_ROOTS ({roots})"
    assert caught.value.errors == [error]
    assert Repository.objects.count() == 0
    # What is stored is served by /repos: the server's own path is written relative to its setting.
    stored = f"sources.yml:3: repos[0].url: local path BASE_DIR is outside GIT_LOCAL_ROOTS ({roots})"
    assert list(Registry.objects.values_list("commit", "last_error")) == [("", stored)]


@pytest.mark.django_db
def test_a_registry_repository_outside_the_roots_is_refused_before_any_fetch(roots, settings, tmp_path):
    outside = GitWorkTree.create(tmp_path / "outside-registry")
    outside.write("sources.yml", "repos: []\n")
    outside.commit("registry")
    settings.SOURCE_REGISTRY_REPO = str(outside.path)

    with pytest.raises(RegistryInvalid) as caught:
        registry_load()

    assert caught.value.errors == [
        f"SOURCE_REGISTRY_REPO: local path {outside.path.resolve()} is outside GIT_LOCAL_ROOTS ({roots})"
    ]
    assert not Path(settings.GIT_CACHE_DIR).exists()


# --- at fetch time ----------------------------------------------------------------------------------


def test_the_token_is_not_sent_to_a_host_it_is_not_listed_for(served, settings):
    settings.GIT_ALLOW_PRIVATE_HOSTS = ["127.0.0.1"]
    settings.GIT_HTTP_TOKEN = TOKEN  # as if the settings had let a token without hosts through

    repository = GitRepository(served.url_for("acme/docs.git"))
    repository.fetch()

    assert len(repository.resolve("main")) == 40
    assert served.requests and not any(request.authorization_header_present for request in served.requests)

    settings.GIT_HTTP_TOKEN_HOSTS = ["git.example.com"]
    GitRepository(served.url_for("acme/docs.git")).fetch()
    assert not any(request.authorization_header_present for request in served.requests)

    settings.GIT_HTTP_TOKEN_HOSTS = ["127.0.0.1"]
    GitRepository(served.url_for("acme/docs.git")).fetch()
    assert served.requests[-1].authorization_header_present


def test_a_private_host_is_refused_at_fetch_time_without_contacting_it(served, settings):
    url = served.url_for("acme/docs.git")

    with pytest.raises(GitError) as caught:
        GitRepository(url).fetch()

    assert str(caught.value) == (
        f"git fetch refused for {url}: host 127.0.0.1 is a loopback address; {PRIVATE_NETWORK_HINT}"
    )
    assert served.requests == []
    assert not Path(settings.GIT_CACHE_DIR).exists()


def test_a_host_name_is_checked_and_pinned_to_the_addresses_checked(served, settings):
    url = f"http://localhost:{served.port}/acme/docs.git"
    with pytest.raises(GitError, match=r"host localhost resolves to 127\.0\.0\.1, a loopback address"):
        GitRepository(url).fetch()
    assert served.requests == []

    settings.GIT_ALLOW_PRIVATE_HOSTS = ["127.0.0.0/8"]
    repository = GitRepository(url)
    repository.fetch()

    assert len(repository.resolve("main")) == 40
    pins = [value for value in repository._environment().values() if value.startswith(f"localhost:{served.port}:")]
    assert pins and pins[0].startswith(f"localhost:{served.port}:127.0.0.1")


def test_a_local_path_outside_the_roots_is_refused_at_fetch_time(roots, settings):
    with pytest.raises(GitError) as caught:
        GitRepository(str(BASE_DIR)).fetch()

    assert str(caught.value) == (
        f"git fetch refused for {BASE_DIR}: local path {BASE_DIR} is outside GIT_LOCAL_ROOTS ({roots})"
    )
    assert not Path(settings.GIT_CACHE_DIR).exists()


def test_a_redirect_is_not_followed(served, settings):
    settings.GIT_ALLOW_PRIVATE_HOSTS = ["127.0.0.1"]
    target = served.base_url

    class Redirect(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(301)
            self.send_header("Location", target + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            return

    redirector = LocalHttpServer(Redirect)
    try:
        with pytest.raises(GitError, match="The requested URL returned error: 301"):
            GitRepository(f"http://127.0.0.1:{redirector.port}/acme/docs.git").fetch()
    finally:
        redirector.stop()

    assert served.requests == []
