"""Does forcing the dense leg onto its HNSW indexes (enable_seqscan and enable_sort off in
`groundtruth/search/dense_search.py`) change what search returns on real documentation?

    python benchmarks/dense_plan_ab.py --eval-set DIR   # after benchmarks/retrieval.py --ingest-only

Every question of the set (paraphrase and FAQ wording) is searched twice in one run over the index
that `benchmarks/retrieval.py` built (database gt_bench_retrieval): with the shipped session
statements, and with the planner free to choose an exact scan (sequential, or by another index,
then a sort of every distance). It prints how many
queries' top 10 and first result differ: none means the retrieval figures are the same.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.benchmark_database import benchmark_database_use

FORCED_INDEX = ("set_config('enable_seqscan', 'off', true), ", "set_config('enable_sort', 'off', true), ")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--eval-set", type=Path, required=True, help="a set like shared/eval-dev")
    parser.add_argument("--database", default="gt_bench_retrieval")
    parser.add_argument("--limit", type=int, default=10)
    options = parser.parse_args()
    benchmark_database_use(options.database)

    from groundtruth.models import Repository
    from groundtruth.search import dense_search
    from groundtruth.search.hybrid_search import chunk_search

    shipped = dense_search.dense_session_statements
    for forcing in FORCED_INDEX:
        assert any(forcing in statement for statement in shipped()), "the shipped statements changed"

    def planner_free() -> list[str]:
        statements = shipped()
        for forcing in FORCED_INDEX:
            statements = [statement.replace(forcing, "") for statement in statements]
        return statements

    repositories = list(Repository.objects.filter(enabled=True))
    questions = [json.loads(line) for line in (options.eval_set / "questions.jsonl").read_text().splitlines()]
    texts = [q[key] for q in questions for key in ("question_paraphrase", "question_verbatim") if q.get(key)]
    top_differs = first_differs = 0
    for text in texts:
        ranked = []
        for statements in (shipped, planner_free):
            dense_search.dense_session_statements = statements
            outcome = chunk_search(query=text, repositories=repositories, limit=options.limit, judge=False)
            ranked.append([hit.chunk.id for hit in outcome.hits])
        dense_search.dense_session_statements = shipped
        top_differs += ranked[0] != ranked[1]
        first_differs += ranked[0][:1] != ranked[1][:1]
    chunk_count = sum(repository.chunks.count() for repository in repositories)
    print(
        f"{len(texts)} queries over {len(repositories)} repositories ({chunk_count} chunks): "
        f"top {options.limit} differs for {top_differs}, the first result for {first_differs}"
    )


if __name__ == "__main__":
    main()
