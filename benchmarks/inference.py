"""The embedding model on PyTorch (sentence-transformers) against ONNX Runtime, side by side.

    nice -n 5 .venv/bin/python benchmarks/inference.py [--seconds 20] [--workers 4]

1. In a fresh process per runtime (so the ONNX one never imports torch): texts/s embedding 256
   passages of the evaluation corpus in ingest batches (EMBEDDING_BATCH_SIZE), the cosine of each
   ONNX vector with the torch one (min and mean), and the median ms of 40 single queries.
2. For each runtime, gunicorn started with the Procfile's web line (WEB_WORKERS workers) on a
   database of its own (gt_bench_inference: 3,000 generated chunks, benchmarks/search.py's
   generator): seconds from start to the first /search answer, then 16 concurrent clients sending
   distinct queries (no embedding-cache hits) for --seconds: requests/s, p50 and p99; the total
   PSS of the web processes (master and workers) after the load; and the seconds a SIGKILLed
   worker takes to be replaced and answer with the model ready.
The ONNX export is made before (manage.py prepare_models); its first-time cost is printed.

    .venv/bin/python benchmarks/inference.py --retrieval [--repositories psf/requests,pallets/jinja]

3. Retrieval unchanged: every chunk of ../shared/eval-dev (chunked as the ingest does: passage text
   and section title) and every question (verbatim and paraphrase) embedded by both runtimes in
   one process: the min and mean cosine of ONNX to torch over all texts, and for how many questions
   the top-10 chunks of their repository (by passage similarity, and by title similarity: the two
   dense inputs of the search) differ in order or membership. Identical rankings mean
   benchmarks/retrieval.py would print identical figures, at a fraction of its cost.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CONCURRENT_CLIENTS = 16

_EMBED_PROGRAM = """
import json, statistics, sys, time
import numpy as np
import django
django.setup()
from groundtruth.embeddings import embedding_backend
texts = json.loads(open(sys.argv[1]).read())
backend = embedding_backend()
if sys.argv[3] == "prepacked":
    from pathlib import Path
    from groundtruth.inference.exported_model import exported_model_ensure
    from groundtruth.inference.sentence_encoder import OnnxSentenceEncoder
    exported = exported_model_ensure(model_dir=Path(backend.model_path), cache_dir=backend.export_dir, timeout=600)
    backend._model = OnnxSentenceEncoder(model_dir=Path(backend.model_path), exported=exported, threads=backend.threads,
                                         share_weights=False)
started = time.perf_counter()
backend.embed(["warm-up"])
loaded = time.perf_counter() - started
started = time.perf_counter()
vectors = np.array(backend.embed(texts), dtype=np.float32)
batch_seconds = time.perf_counter() - started
single = []
for index in range(40):
    started = time.perf_counter()
    backend.embed([f"how do I configure the {index}th worker of the server"])
    single.append(time.perf_counter() - started)
np.save(sys.argv[2], vectors)
print(json.dumps({"load_s": loaded, "texts_per_s": len(texts) / batch_seconds,
                  "single_ms": statistics.median(single) * 1000, "torch": "torch" in sys.modules}))
"""


def passages(count: int) -> list[str]:
    found: list[str] = []
    for path in sorted((ROOT.parent / "shared" / "eval-dev" / "corpus").rglob("*.md")):
        for block in path.read_text(errors="replace").split("\n\n"):
            if len(block.strip()) > 200:
                found.append(block.strip()[:1500])
            if len(found) == count:
                return found
    return found


def embed_in_fresh_process(runtime: str, threads: int, texts_path: Path, out: Path, variant: str = "") -> dict:
    # A command process embeds on EMBEDDING_WORKER_THREADS (EMBEDDING_THREADS is the web's).
    env = {**os.environ, "EMBEDDING_RUNTIME": runtime, "EMBEDDING_WORKER_THREADS": str(threads)}
    env.setdefault("DJANGO_SETTINGS_MODULE", "agentplatform.settings")
    finished = subprocess.run(
        [sys.executable, "-c", _EMBED_PROGRAM, str(texts_path), str(out), variant or "shared"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(finished.stdout.strip().splitlines()[-1])


def retrieval_compare(repositories: set[str] | None) -> None:
    """Part 3 of the module docstring."""
    import numpy as np
    from django.conf import settings

    from groundtruth.embeddings import LocalSentenceTransformer, packaged_model_path
    from groundtruth.ingest.chunking import file_chunk
    from groundtruth.ingest.index_text import heading_text, passage_text

    eval_dev = ROOT.parent / "shared" / "eval-dev"
    passages: dict[str, list[str]] = {}
    titles: dict[str, list[str]] = {}
    for folder in sorted((eval_dev / "corpus").iterdir()):
        name = folder.name.replace("__", "/", 1)
        if not folder.is_dir() or (repositories is not None and name not in repositories):
            continue
        for path in sorted([*folder.rglob("*.rst"), *folder.rglob("*.md")]):
            drafts = file_chunk(
                path=str(path.relative_to(folder)),
                text=path.read_text(errors="replace"),
                max_chars=settings.CHUNK_MAX_CHARS,
                config_whole_max_chars=settings.CONFIG_WHOLE_FILE_MAX_CHARS,
            )
            for draft in drafts:
                passages.setdefault(name, []).append(
                    passage_text(repository_name=name, heading=draft.heading, text=draft.text)
                )
                titles.setdefault(name, []).append(heading_text(draft.heading) or "")
    questions: dict[str, list[str]] = {}
    for line in (eval_dev / "questions.jsonl").read_text().splitlines():
        entry = json.loads(line)
        if entry.get("repo") in passages:
            for key in ("question_verbatim", "question_paraphrase"):
                if entry.get(key):
                    questions.setdefault(entry["repo"], []).append(entry[key])
    names = sorted(passages)
    texts = [text for name in names for text in (*passages[name], *titles[name], *questions.get(name, []))]
    print(
        f"{sum(len(passages[name]) for name in names)} chunks (passage and title) and "
        f"{sum(len(questions.get(name, [])) for name in names)} questions of {len(names)} repositories: "
        f"{len(texts)} texts"
    )
    vectors = {}
    for runtime in ("torch", "onnx"):
        backend = LocalSentenceTransformer(
            model_path=str(packaged_model_path()),
            batch_size=settings.EMBEDDING_BATCH_SIZE,
            runtime=runtime,
            threads=settings.EMBEDDING_WORKER_THREADS,
            export_dir=Path(settings.VAR_DIR) / "models",
        )
        started = time.perf_counter()
        vectors[runtime] = np.array(backend.embed(texts), dtype=np.float32)
        print(f"{runtime}: {len(texts) / (time.perf_counter() - started):.1f} texts/s")
    cosines = (vectors["torch"] * vectors["onnx"]).sum(axis=1)
    print(f"cosine of ONNX to torch: min {cosines.min():.7f}, mean {cosines.mean():.7f}")
    position = 0
    # A chunk's title is its section's: the chunks of one section share one title text, so their
    # title similarities tie exactly and their order among themselves is float noise (the search
    # breaks such ties by chunk id). Beside the chunk ids, the top 10 are compared as texts: a
    # difference there is a different title or passage, not a reshuffled tie.
    differing = {"passage": 0, "title": 0, "either": 0}
    differing_texts = {"passage": 0, "title": 0, "either": 0}
    asked = 0
    for name in names:
        count, asked_here = len(passages[name]), len(questions.get(name, []))
        block = {runtime: matrix[position : position + 2 * count + asked_here] for runtime, matrix in vectors.items()}
        position += 2 * count + asked_here
        asked += asked_here
        for index in range(asked_here):
            changed, changed_texts = set(), set()
            for kind, rows, texts_of in (
                ("passage", slice(0, count), passages[name]),
                ("title", slice(count, 2 * count), titles[name]),
            ):
                tops = [
                    tuple(np.argsort(-(block[runtime][rows] @ block[runtime][2 * count + index]), kind="stable")[:10])
                    for runtime in ("torch", "onnx")
                ]
                if tops[0] != tops[1]:
                    changed.add(kind)
                    differing[kind] += 1
                if [texts_of[row] for row in tops[0]] != [texts_of[row] for row in tops[1]]:
                    changed_texts.add(kind)
                    differing_texts[kind] += 1
            differing["either"] += bool(changed)
            differing_texts["either"] += bool(changed_texts)
    print(
        f"questions whose top-10 differs, of {asked}: by passage {differing['passage']}, "
        f"by title {differing['title']}, either {differing['either']} (chunk ids); "
        f"by passage {differing_texts['passage']}, by title {differing_texts['title']}, "
        f"either {differing_texts['either']} (texts: ties between chunks of one section's title left out)"
    )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def procfile_web(env: dict[str, str]) -> list[str]:
    import re

    line = next(line for line in (ROOT / "Procfile").read_text().splitlines() if line.startswith("web:"))
    expanded = re.sub(r"\$\{(\w+)(?::-([^}]*))?\}", lambda m: env.get(m[1]) or (m[2] or ""), line[4:].strip())
    return shlex.split(expanded)


def web_pss_mb(master_pid: int) -> tuple[float, int]:
    import psutil

    master = psutil.Process(master_pid)
    processes = [master, *master.children(recursive=True)]
    return sum(process.memory_full_info().pss for process in processes) / 1e6, len(processes)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def server_run(runtime: str, *, secret: str, workers: int, seconds: float, work: Path) -> dict:
    import httpx

    port = free_port()
    env = {
        **os.environ,
        "EMBEDDING_RUNTIME": runtime,
        "WEB_PORT": str(port),
        "WEB_HOST": "127.0.0.1",
        "WEB_WORKERS": str(workers),
        "DEBUG": "false",
        "RATE_LIMIT_AUTHENTICATED": "100000000/m",
    }
    log_path = work / f"web-{runtime}.log"
    headers = {"Authorization": f"Bearer {secret}"}
    url = f"http://127.0.0.1:{port}/search"
    started = time.monotonic()
    with log_path.open("ab") as log:
        server = subprocess.Popen(
            procfile_web(env), cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        first_answer = None
        while time.monotonic() - started < 300:
            try:
                response = httpx.get(url, params={"q": "configure the server"}, headers=headers, timeout=60)
                if response.status_code == 200:
                    first_answer = time.monotonic() - started
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        if first_answer is None:
            raise SystemExit(f"no /search answer from the {runtime} server; see {log_path}")
        # Every worker has its model before the load starts (the Procfile's workers load it at start).
        while log_path.read_text().count("embedding backend ready") < workers:
            time.sleep(0.2)
        pss_before, _ = web_pss_mb(server.pid)
        latencies: list[float] = []
        errors = [0]
        stop_at = time.monotonic() + seconds

        def client(number: int) -> None:
            with httpx.Client(headers=headers, timeout=60) as session:
                index = 0
                while time.monotonic() < stop_at:
                    index += 1
                    began = time.perf_counter()
                    response = session.get(url, params={"q": f"how does client {number} configure worker {index}"})
                    latencies.append(time.perf_counter() - began)
                    if response.status_code != 200:
                        errors[0] += 1

        load_started = time.monotonic()
        threads = [threading.Thread(target=client, args=(number,)) for number in range(CONCURRENT_CLIENTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.monotonic() - load_started
        pss_after, processes = web_pss_mb(server.pid)

        import psutil

        victim = psutil.Process(server.pid).children()[0]
        ready_lines = log_path.read_text().count("embedding backend ready")
        killed_at = time.monotonic()
        victim.send_signal(signal.SIGKILL)
        while log_path.read_text().count("embedding backend ready") <= ready_lines:
            if time.monotonic() - killed_at > 300:
                break
            time.sleep(0.05)
        replaced = time.monotonic() - killed_at
        return {
            "first_answer_s": first_answer,
            "requests_per_s": len(latencies) / elapsed,
            "p50_ms": percentile(latencies, 0.5) * 1000,
            "p99_ms": percentile(latencies, 0.99) * 1000,
            "errors": errors[0],
            "pss_before_mb": pss_before,
            "pss_after_mb": pss_after,
            "processes": processes,
            "worker_replaced_s": replaced,
        }
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--skip-server", action="store_true", help="only the in-process measurements")
    parser.add_argument("--retrieval", action="store_true", help="only part 3: retrieval unchanged")
    parser.add_argument("--repositories", help="part 3 on these eval-dev repositories (owner/name,...)")
    args = parser.parse_args()
    os.environ.setdefault("CACHE_KEY_PREFIX", "bench-inference")
    if args.retrieval:
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentplatform.settings")
        import django

        django.setup()
        retrieval_compare(set(args.repositories.split(",")) if args.repositories else None)
        return
    work = Path(tempfile.mkdtemp(prefix="bench-inference-"))

    import numpy as np

    texts = passages(256)
    texts_path = work / "texts.json"
    texts_path.write_text(json.dumps(texts))
    export_started = time.monotonic()
    with tempfile.TemporaryDirectory() as fresh:
        from groundtruth.embeddings import packaged_model_path
        from groundtruth.inference.exported_model import exported_model_ensure

        exported_model_ensure(model_dir=packaged_model_path(), cache_dir=Path(fresh), timeout=600)
    print(f"first-time ONNX export (into an empty cache): {time.monotonic() - export_started:.1f} s")
    subprocess.run([sys.executable, "manage.py", "prepare_models"], cwd=ROOT, check=True, capture_output=True)

    print(f"\n{len(texts)} passages of ../shared/eval-dev, batches of 64, one fresh process each:")
    results = {}
    # "prepacked": ONNX Runtime's prepacked weights, private to each process (what sharing costs).
    for runtime, threads, variant in (("torch", 0, ""), ("onnx", 1, ""), ("onnx", 2, ""), ("onnx", 1, "prepacked")):
        label = runtime if runtime == "torch" else f"onnx, {threads} thread{'s' if threads > 1 else ''}"
        label += f", {variant}" if variant else ""
        out = work / f"{runtime}{threads}{variant}.npy"
        results[label] = embed_in_fresh_process(runtime, max(threads, 1), texts_path, out, variant)
        results[label]["vectors"] = np.load(out)
    reference = results["torch"]["vectors"]
    print(
        f"{'runtime':<28}{'load s':>8}{'texts/s':>9}{'x torch':>9}{'1 query ms':>12}"
        f"{'min cos':>10}{'mean cos':>10}  torch"
    )
    for label, result in results.items():
        cosines = (result["vectors"] * reference).sum(axis=1)
        print(
            f"{label:<28}{result['load_s']:>8.2f}{result['texts_per_s']:>9.1f}"
            f"{result['texts_per_s'] / results['torch']['texts_per_s']:>9.2f}{result['single_ms']:>12.1f}"
            f"{cosines.min():>10.6f}{cosines.mean():>10.6f}  {'imported' if result['torch'] else 'not imported'}"
        )
    if args.skip_server:
        return

    from benchmarks.benchmark_database import benchmark_database_use

    benchmark_database_use("gt_bench_inference")
    from agents.models import ApiKeyKind
    from agents.services import api_key_create
    from benchmarks.search import chunks_generate

    chunks_generate(3000, embedded=300)
    _, secret = api_key_create(kind=ApiKeyKind.SERVICE, name="inference benchmark", scopes=["read"])
    print(
        f"\n/search, gunicorn as the Procfile starts it ({args.workers} workers), "
        f"{CONCURRENT_CLIENTS} concurrent clients for {args.seconds:g} s, distinct queries:"
    )
    served = {
        runtime: server_run(runtime, secret=secret, workers=args.workers, seconds=args.seconds, work=work)
        for runtime in ("torch", "onnx")
    }
    print(
        f"{'runtime':<8}{'first answer s':>15}{'req/s':>8}{'x torch':>9}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}"
        f"{'PSS MB idle':>13}{'PSS MB loaded':>15}{'worker back s':>15}"
    )
    for runtime, result in served.items():
        print(
            f"{runtime:<8}{result['first_answer_s']:>15.1f}{result['requests_per_s']:>8.1f}"
            f"{result['requests_per_s'] / served['torch']['requests_per_s']:>9.2f}{result['p50_ms']:>9.0f}"
            f"{result['p99_ms']:>9.0f}{result['errors']:>8}{result['pss_before_mb']:>13.0f}"
            f"{result['pss_after_mb']:>15.0f}{result['worker_replaced_s']:>15.1f}"
        )
    print(f"(PSS: gunicorn master and {args.workers} workers; logs in {work})")


if __name__ == "__main__":
    main()
