"""A sentence-transformers model run by ONNX Runtime: the same tokens (the model's tokenizer.json,
truncated at its max_seq_length), the same mean pooling over the attention mask and the same
normalisation (both inside the exported graph), so the same vectors as sentence-transformers.

The session maps the exported weights file instead of copying it (prepacking disabled): every
process on the host that runs the model shares one copy of the weights in the page cache, and a
new process (a replaced gunicorn worker) is ready in well under a second.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime
from tokenizers import Tokenizer

from groundtruth.inference.exported_model import ExportedModel

# The most padded tokens one inference runs (its text count x its longest text's tokens).
# Measured on 128 eval-dev passages (docs/inference.md), against sentence-transformers' batches
# of 64: 512 ran 2.2x its texts/s, 1,024 2.0x, 2,048 1.7x, fixed batches of 64 ordered by tokens
# 0.75x. 512 still runs 64 queries of 8 tokens together.
BATCH_TOKENS = 512


class OnnxSentenceEncoder:
    def __init__(
        self,
        *,
        model_dir: Path,
        exported: ExportedModel,
        threads: int,
        share_weights: bool = True,
        batch_tokens: int = BATCH_TOKENS,
    ) -> None:
        config = json.loads((model_dir / "sentence_bert_config.json").read_text())
        self.max_seq_length = int(config["max_seq_length"])
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        # sentence-transformers overrides tokenizer.json's own truncation (128) and fixed padding.
        self.tokenizer.enable_truncation(max_length=self.max_seq_length)
        # Padding is done per batch in encode(), after the texts are ordered by token count.
        self.tokenizer.no_padding()
        self.pad_id = self.tokenizer.token_to_id("[PAD]") or 0
        self.batch_tokens = batch_tokens
        self.sep_id = self.tokenizer.token_to_id("[SEP]")
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # Idle pool threads would spin on the two cores other processes need.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        # Prepacked copies of the weights would be private to each process (55 MB each);
        # benchmarks/inference.py measures what sharing costs in speed.
        if share_weights:
            options.add_session_config_entry("session.disable_prepacking", "1")
        options.log_severity_level = 3
        self.session = onnxruntime.InferenceSession(
            str(exported.graph_path), sess_options=options, providers=["CPUExecutionProvider"]
        )

    def encode(self, texts: list[str], *, batch_size: int) -> np.ndarray:
        """Unit-length float32 vectors, one row per text, in the order given.

        Texts are tokenised once, ordered by their token count and run in batches of at most
        `batch_size` texts and at most `batch_tokens` padded tokens: a batch pads little, and a
        batch of long passages stays small. The attention scores of a batch (texts x 12 heads x
        tokens x tokens floats) outgrow the CPU caches fast: 64 passages of 256 tokens hold 200 MB
        of them (docs/inference.md has the figures).
        """
        if not texts:
            return np.empty((0, 0), dtype=np.float32)
        encodings = self.tokenizer.encode_batch(texts)
        order = sorted(range(len(texts)), key=lambda index: -len(encodings[index].ids))
        vectors: np.ndarray | None = None
        for batch in token_batches([len(encodings[index].ids) for index in order], self.batch_tokens, batch_size):
            indexes = [order[position] for position in batch]
            input_ids, attention_mask = self._padded([encodings[index].ids for index in indexes])
            (embedding,) = self.session.run(["embedding"], {"input_ids": input_ids, "attention_mask": attention_mask})
            if vectors is None:
                vectors = np.empty((len(texts), embedding.shape[1]), dtype=np.float32)
            vectors[indexes] = embedding
        return vectors if vectors is not None else np.empty((0, 0), dtype=np.float32)

    def token_ids(self, texts: list[str], *, max_tokens: int | None = None) -> list[np.ndarray]:
        """Each text's word-piece ids, the rows `token_vectors` returns for it ([CLS] and [SEP]
        left out, truncated alike): what the judge weights a question's pieces by."""
        limit = min(max_tokens or self.max_seq_length, self.max_seq_length)
        identified = []
        for encoding in self.tokenizer.encode_batch(texts):
            ids = [
                piece for piece, mask in zip(encoding.ids[:limit], encoding.attention_mask[:limit], strict=True) if mask
            ]
            end = len(ids) - 1 if ids and ids[-1] == self.sep_id else len(ids)
            identified.append(np.array(ids[1:end], dtype=np.int64))
        return identified

    def token_vectors(self, texts: list[str], *, batch_size: int, max_tokens: int | None = None) -> list[np.ndarray]:
        """Each text's token vectors (tokens x dimension, float32, unit length, [CLS] and [SEP]
        left out), in the order given: what the relevance judge compares token by token.
        `max_tokens` truncates shorter than the model's own limit (a cheaper passage). Batched as
        encode() batches."""
        limit = min(max_tokens or self.max_seq_length, self.max_seq_length)
        vectors: list[np.ndarray] = [np.empty((0, 0), dtype=np.float32)] * len(texts)
        if not texts:
            return vectors
        ids_of = [encoding.ids[:limit] for encoding in self.tokenizer.encode_batch(texts)]
        order = sorted(range(len(texts)), key=lambda index: -len(ids_of[index]))
        for batch in token_batches([len(ids_of[index]) for index in order], self.batch_tokens, batch_size):
            indexes = [order[position] for position in batch]
            input_ids, attention_mask = self._padded([ids_of[index] for index in indexes])
            (tokens,) = self.session.run(["tokens"], {"input_ids": input_ids, "attention_mask": attention_mask})
            for row, index in enumerate(indexes):
                ids = ids_of[index]
                # Truncation at `limit` cuts the final [SEP]; the first token is always [CLS].
                end = len(ids) - 1 if ids[-1] == self.sep_id else len(ids)
                kept = tokens[row, 1:end]
                vectors[index] = kept / np.maximum(np.linalg.norm(kept, axis=1, keepdims=True), 1e-9)
        return vectors

    def _padded(self, rows: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
        """The model's inputs for token id rows, longest first: ids padded to the first row's
        length, and the attention mask."""
        width = len(rows[0])
        input_ids = np.full((len(rows), width), self.pad_id, dtype=np.int64)
        attention_mask = np.zeros((len(rows), width), dtype=np.int64)
        for row, ids in enumerate(rows):
            input_ids[row, : len(ids)] = ids
            attention_mask[row, : len(ids)] = 1
        return input_ids, attention_mask


def token_batches(lengths: list[int], batch_tokens: int, batch_size: int) -> list[range]:
    """Consecutive positions of `lengths` (longest first) grouped so that a batch's padded size
    (its count times its first, longest, length) stays within `batch_tokens` and its count within
    `batch_size`; a text longer than `batch_tokens` runs alone."""
    batches: list[range] = []
    start = 0
    while start < len(lengths):
        fits = max(1, batch_tokens // max(lengths[start], 1))
        end = min(len(lengths), start + min(fits, batch_size))
        batches.append(range(start, end))
        start = end
    return batches
