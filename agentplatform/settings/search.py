"""Ground-truth search and /ask (groundtruth/search/). The parameters a fit produced are not
here: they are data, in groundtruth/search/fitted/ with their provenance."""

from __future__ import annotations

import itertools
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from agentplatform.settings.core import VAR_DIR
from agentplatform.settings.env import env, env_boolean, env_non_negative, env_positive_int, env_weights

# Defaults tuned on real documentation and cross-validated by repository (benchmarks/retrieval.py).
SEARCH_CANDIDATE_DEPTH = env_positive_int("SEARCH_CANDIDATE_DEPTH", 50)
SEARCH_LEXICAL_WEIGHT = env_non_negative("SEARCH_LEXICAL_WEIGHT", 0.1)
SEARCH_DENSE_WEIGHT = env_non_negative("SEARCH_DENSE_WEIGHT", 1.0)
SEARCH_RRF_K = env_non_negative("SEARCH_RRF_K", 10.0)
# Dense score: the passage similarity, lifted to (1 - SEARCH_HEADING_WEIGHT) * passage +
# SEARCH_HEADING_WEIGHT * title similarity when the title matches better.
SEARCH_HEADING_WEIGHT = env_non_negative("SEARCH_HEADING_WEIGHT", 0.15)
if SEARCH_HEADING_WEIGHT > 1:
    raise ImproperlyConfigured(f"SEARCH_HEADING_WEIGHT must be between 0 and 1, got {SEARCH_HEADING_WEIGHT}")
SEARCH_BM25_K1 = env_non_negative("SEARCH_BM25_K1", 1.2)
SEARCH_BM25_B = env_non_negative("SEARCH_BM25_B", 0.75)
if SEARCH_BM25_B > 1:
    raise ImproperlyConfigured(f"SEARCH_BM25_B must be between 0 and 1, got {SEARCH_BM25_B}")
SEARCH_LEXICAL_MAX_CANDIDATES = env_positive_int("SEARCH_LEXICAL_MAX_CANDIDATES", 1000)
SEARCH_HNSW_EF_SEARCH = env_positive_int("SEARCH_HNSW_EF_SEARCH", 100)
SEARCH_HNSW_MAX_SCAN_TUPLES = env_positive_int("SEARCH_HNSW_MAX_SCAN_TUPLES", 20000)
# Query embeddings kept per web process (in-process LRU; entries, about 3 KB each).
SEARCH_EMBEDDING_CACHE_SIZE = env_positive_int("SEARCH_EMBEDDING_CACHE_SIZE", 1024)
# Multipliers of the fused score by trust tier: near-tie breakers, so each is in [0.9, 1].
_trust_tiers = ("canonical", "reviewed", "community", "transcript")
SEARCH_TRUST_WEIGHTS = env_weights(
    "SEARCH_TRUST_WEIGHTS", {"canonical": 1.0, "reviewed": 0.98, "community": 0.96, "transcript": 0.92}
)
if (
    sorted(SEARCH_TRUST_WEIGHTS) != sorted(_trust_tiers)
    or any(not 0.9 <= weight <= 1 for weight in SEARCH_TRUST_WEIGHTS.values())
    or any(
        SEARCH_TRUST_WEIGHTS[higher] < SEARCH_TRUST_WEIGHTS[lower] for higher, lower in itertools.pairwise(_trust_tiers)
    )
):
    raise ImproperlyConfigured(
        "SEARCH_TRUST_WEIGHTS must give canonical, reviewed, community and transcript each a weight from 0.9 to 1, "
        "in that order from highest to lowest (they break near-ties; a larger spread would let a weakly matching "
        "canonical passage outrank a strongly matching community one)"
    )
# Re-ranking (groundtruth/search/reranking.py) of the first SEARCH_RERANK_DEPTH fused candidates
# (0: none). Its weights are data, fitted with their provenance in groundtruth/search/fitted/.
SEARCH_RERANK_DEPTH = int(env_non_negative("SEARCH_RERANK_DEPTH", 40))
# A fit file of one's own (a refit on the deployment's documentation) instead of the shipped one:
# a file, not numbers, so that whatever is in use carries the fit that produced it.
SEARCH_RERANK_FIT_FILE = env.str("SEARCH_RERANK_FIT_FILE", default="")
# The relevance judge (docs/ground-truth-judge.md) is off by default: on the measured subset it
# refused no answerable question but caught far fewer unanswerable ones than today's model.
JUDGE_ENABLED = env_boolean("JUDGE_ENABLED", False)
JUDGE_DIR = Path(env.str("JUDGE_DIR", default="") or VAR_DIR / "judges")
SEARCH_JUDGE_DEPTH = env_positive_int("SEARCH_JUDGE_DEPTH", 8)
# The judge's order mixes its score with today's relevance: alone it put the answer first for 0.45
# of the development set's paraphrased questions, mixed with 5 x relevance for 0.86, as today's
# ranking does (of the three weights measured, 0, 1 and 5; docs/ground-truth-judge.md).
SEARCH_JUDGE_RELEVANCE_WEIGHT = env_non_negative("SEARCH_JUDGE_RELEVANCE_WEIGHT", 5.0)
# A refit is queued after an ingest once this share of the judged chunks changed: a judge follows
# its corpus without refitting on every push.
JUDGE_REFIT_CHANGED_SHARE = env_non_negative("JUDGE_REFIT_CHANGED_SHARE", 0.1)
# /ask: at most how many passages to cite; a passage after the first is cited only while its
# dense score is within ASK_CITATION_MARGIN of the first's; at most how many lines a snippet keeps.
ASK_CITATION_COUNT = env_positive_int("ASK_CITATION_COUNT", 5)
ASK_CITATION_MARGIN = env_non_negative("ASK_CITATION_MARGIN", 0.05)
ASK_SNIPPET_MAX_LINES = env_positive_int("ASK_SNIPPET_MAX_LINES", 8)
# ... and at most how many characters: lines can be of any length (one 900,000-character line
# once made a 900 KB snippet). As long as a chunk by default, so ordinary snippets are unchanged.
ASK_SNIPPET_MAX_CHARS = env_positive_int("ASK_SNIPPET_MAX_CHARS", 1500)
# The audit of questions (groundtruth/question_audit.py) names who asked what: kept only as long
# as the teams need it to see what the docs do not answer, then purged daily by beat.
QUESTION_AUDIT_RETENTION_DAYS = env_positive_int("QUESTION_AUDIT_RETENTION_DAYS", 90)
# Each record is queued and written by a thread of the process, in batches, so that no request
# waits on the INSERT; false: written by the request's thread (what the tests read back inside
# their transaction). A queued record waits up to QUESTION_AUDIT_FLUSH_SECONDS: what a SIGKILLed
# process loses (groundtruth/question_audit.py).
QUESTION_AUDIT_BACKGROUND = env_boolean("QUESTION_AUDIT_BACKGROUND", True)
QUESTION_AUDIT_FLUSH_SECONDS = env_non_negative("QUESTION_AUDIT_FLUSH_SECONDS", 0.2)
# Missing sources (groundtruth/search/abstention.py): the model and threshold are data, in
# groundtruth/search/fitted/abstention.json; as for the re-ranking, a file of one's own may replace it.
ASK_ABSTENTION_FIT_FILE = env.str("ASK_ABSTENTION_FIT_FILE", default="")
