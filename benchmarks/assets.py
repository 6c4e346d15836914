"""Brand asset content through the API next to the same file from Django's static file view.

    .venv/bin/python benchmarks/assets.py [--port 8510] [--duration 10] [--connections 16]

What it does, in one run:
1. Builds a brand git repo under var/bench-assets/ holding a 200 KB PNG (random pixels, so it
   does not compress) and a registry repo whose brand-assets.yml lists it; copies the same file
   into a static directory.
2. Creates a separate database `bench_assets` on the embedded PostgreSQL (dropped first if left
   over, dropped again at the end), migrates it, creates a service key with scope `read` and runs
   the brand asset sync. Redis is the one at REDIS_URL with a key prefix of this run's own.
3. Starts gunicorn with the web line of the Procfile on 127.0.0.1:<port>, with settings that add
   `/bench/static/<path>` served by `django.views.static.serve` (benchmarks/server_settings.py).
   Rate limits are raised through the environment so they never throttle; they are still
   counted in Redis on every API request, so their cost is in the figures.
4. With wrk (`apt-get install -y wrk`), `--connections` connections for `--duration` seconds
   after a warm-up each: the static view (first and last, the mean is the reference), then
   GET /assets/bench/image/0/content with the service key (answered from the content cache,
   keyed by blob SHA), and the same with If-None-Match (304). Then it restarts gunicorn with
   ASSET_CONTENT_CACHE_BYTES=0 and measures the content endpoint reading git on every request,
   to show what the cache buys (skip with --skip-uncached).

Target: the content endpoint through the cache at >= 50% of the static view's requests/s.
The load generator shares the machine's cores with the server, as any local run does.
"""

from __future__ import annotations

import hashlib
import os
import random
import shlex
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR))

from benchmarks.api import (  # noqa: E402
    Measurement,
    clear_redis_prefix,
    load_argument_parser,
    procfile_web_command,
    server_environment,
    stop,
    wrk_run,
)
from benchmarks.benchmark_git import git  # noqa: E402

DATABASE_NAME = "bench_assets"
TARGET_SHARE = 0.5
ASSET_PATH = "images/hero-200k.png"
CONTENT_PATH = "/assets/bench/image/0/content"
STATIC_PATH = "/bench/static/hero-200k.png"


def main() -> int:
    parser = load_argument_parser(description=__doc__, default_port=8510)
    parser.add_argument("--skip-uncached", action="store_true", help="do not measure with the cache disabled")
    args = parser.parse_args()

    wrk = shutil.which("wrk")
    if wrk is None:
        print("wrk is not installed: apt-get install -y wrk (Debian/Ubuntu) or brew install wrk", file=sys.stderr)
        return 2
    work = BASE_DIR / "var" / "bench-assets"
    shutil.rmtree(work, ignore_errors=True)
    image = png_noise(width=256, height=200, seed=42)
    registry = build_repositories(work, image)
    prefix = f"bench-assets-{os.getpid()}"
    env = {
        **server_environment(args, key_prefix=prefix),
        "BENCH_STATIC_ROOT": str(work / "static"),
        "SOURCE_REGISTRY_REPO": str(registry),
        "SOURCE_REGISTRY_REF": "main",
        "BRAND_ASSETS_PATH": "brand-assets.yml",
        "GIT_CACHE_DIR": str(work / "git-cache"),
        "GIT_LOCAL_ROOTS": str(work),
    }
    os.environ.update({key: env[key] for key in env if key != "DJANGO_SETTINGS_MODULE"})
    drop_database()
    try:
        token = prepare_database()
        env["DATABASE_URL"] = os.environ["DATABASE_URL"]
        print(f"database: {DATABASE_NAME} ({env['DATABASE_URL']})")
        print(f"asset: {ASSET_PATH}, {len(image)} bytes, blob {git_blob_sha(image)[:12]}")
        base = f"http://127.0.0.1:{args.port}"
        auth = {"Authorization": f"Bearer {token}"}

        def measure(name: str, path: str, headers: dict[str, str] | None = None) -> Measurement:
            wrk_run(wrk, base + path, args.warmup, args.connections, args.threads, headers)
            result = wrk_run(wrk, base + path, args.duration, args.connections, args.threads, headers)
            return Measurement(name=name, path=path, **result)

        etag = f'"{git_blob_sha(image)}"'
        with gunicorn(env, work / "gunicorn.log") as _server:
            wait_until_serving(base + STATIC_PATH)
            check(base + STATIC_PATH, {}, image)
            check(base + CONTENT_PATH, auth, image)
            static_first = measure("static view", STATIC_PATH)
            cached = measure("content (cache)", CONTENT_PATH, auth)
            not_modified = measure("content 304", CONTENT_PATH, {**auth, "If-None-Match": etag})
            static_last = measure("static view", STATIC_PATH)
        uncached = None
        if not args.skip_uncached:
            with gunicorn({**env, "ASSET_CONTENT_CACHE_BYTES": "0"}, work / "gunicorn-uncached.log") as _server:
                wait_until_serving(base + STATIC_PATH)
                check(base + CONTENT_PATH, auth, image)
                uncached = measure("content (no cache)", CONTENT_PATH, auth)
    finally:
        clear_redis_prefix(env, prefix)
        drop_database()

    reference = (static_first.requests_per_second + static_last.requests_per_second) / 2
    print()
    print(
        f"{len(image)} byte PNG, {args.connections} concurrent connections, {args.duration} s each, "
        f"gunicorn {args.workers} workers, wrk {args.threads} threads, {os.cpu_count()} CPUs"
    )
    header = (
        f"{'measurement':<20} {'path':<36} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7} {'of static':>10}"
    )
    print(header)
    print("-" * len(header))
    rows = [static_first, cached, not_modified, static_last, *([uncached] if uncached else [])]
    for row in rows:
        share = row.requests_per_second / reference
        print(
            f"{row.name:<20} {row.path:<36} {row.requests_per_second:>8.0f} {row.p50_ms:>8.2f} {row.p99_ms:>8.2f} "
            f"{row.errors:>7} {share:>10.0%}"
        )
    share = cached.requests_per_second / reference
    verdict = "ok" if share >= TARGET_SHARE else "BELOW TARGET"
    print(
        f"content through the cache: {share:.0%} of the static view "
        f"(reference {reference:.0f} req/s, mean of first and last); target >= {TARGET_SHARE:.0%}: {verdict}"
    )
    errors = sum(row.errors for row in rows)
    return 0 if share >= TARGET_SHARE and not errors else 1


# --- fixtures -------------------------------------------------------------------------------------


def png_noise(*, width: int, height: int, seed: int) -> bytes:
    """A valid RGBA PNG of random pixels (incompressible: about width * height * 4 bytes)."""
    from agentplatform.demo.brand_assets import png_bytes

    noise = random.Random(seed).randbytes(width * height * 4)

    def pixel(x: int, y: int) -> tuple[int, int, int, int]:
        offset = (y * width + x) * 4
        return tuple(noise[offset : offset + 4])  # type: ignore[return-value]

    return png_bytes(width, height, pixel)


def git_blob_sha(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # git's object id


def build_repositories(work: Path, image: bytes) -> Path:
    """The brand repo with the image, the registry repo listing it, and the static copy."""
    brand, registry, static = work / "brand", work / "registry", work / "static"
    for directory in (brand, registry, static):
        directory.mkdir(parents=True)
    (brand / ASSET_PATH).parent.mkdir(parents=True)
    (brand / ASSET_PATH).write_bytes(image)
    (static / Path(STATIC_PATH).name).write_bytes(image)
    (registry / "brand-assets.yml").write_text(
        f"repos:\n  bench/brand: {{url: {brand}}}\n"
        f"products:\n  bench:\n    image:\n      - {{repo: bench/brand, path: {ASSET_PATH}, format: png}}\n"
    )
    for tree in (brand, registry):
        git(tree, "init", "--quiet", "--initial-branch", "main")
        git(tree, "add", "--all")
        git(tree, "commit", "--quiet", "-m", "bench")
    return registry


# --- the database ---------------------------------------------------------------------------------


def drop_database() -> None:
    import psycopg

    socket_dir = str(BASE_DIR / "var" / "pgdata")
    if not (Path(socket_dir) / "postmaster.pid").exists():
        return
    with psycopg.connect(host=socket_dir, user="postgres", dbname="postgres", autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{DATABASE_NAME}" WITH (FORCE)')


def prepare_database() -> str:
    """Creates and migrates the benchmark database, syncs the registry; returns a read key."""
    from benchmarks.benchmark_database import benchmark_database_use

    benchmark_database_use(DATABASE_NAME)
    from agents.services import api_key_create
    from brandassets.services import asset_registry_sync

    report = asset_registry_sync()
    if not report.ok or report.missing:
        raise SystemExit("\n".join(report.lines()))
    print(report.lines()[0])
    _key, token = api_key_create(kind="service", name="bench assets", scopes=["read"])
    from django.db import connections

    connections.close_all()  # so that the database can be dropped at the end
    return token


# --- the server and the load ----------------------------------------------------------------------


class gunicorn:  # lower case: used as a context manager, like open()
    """The Procfile's web line, started in its own session and stopped with it."""

    def __init__(self, env: dict[str, str], log_path: Path) -> None:
        self.env, self.log_path = env, log_path
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> subprocess.Popen:
        command = procfile_web_command(self.env)
        print(f"server: {shlex.join(command)} (cache {self.env.get('ASSET_CONTENT_CACHE_BYTES', 'default')})")
        with self.log_path.open("w") as log:
            self.process = subprocess.Popen(
                command, cwd=BASE_DIR, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        return self.process

    def __exit__(self, *exc_info: object) -> None:
        if self.process is not None:
            stop(self.process)


def wait_until_serving(url: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=30) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise SystemExit(f"the server did not answer {url} within {timeout:.0f} s")


def check(url: str, headers: dict[str, str], expected: bytes) -> None:
    request = urllib.request.Request(url, headers=headers)
    with urllib.request.urlopen(request, timeout=30) as response:
        body = response.read()
        if response.status != 200 or body != expected:
            raise SystemExit(f"{url}: status {response.status}, {len(body)} bytes, not the asset")
        print(f"checked {url}: 200, {len(body)} bytes, {response.headers.get('Content-Type')}")


if __name__ == "__main__":
    sys.exit(main())
