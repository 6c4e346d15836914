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


class OnnxSentenceEncoder:
    def __init__(self, *, model_dir: Path, exported: ExportedModel, threads: int, share_weights: bool = True) -> None:
        config = json.loads((model_dir / "sentence_bert_config.json").read_text())
        self.max_seq_length = int(config["max_seq_length"])
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        # sentence-transformers overrides tokenizer.json's own truncation (128) and fixed padding.
        self.tokenizer.enable_truncation(max_length=self.max_seq_length)
        pad_id = self.tokenizer.token_to_id("[PAD]") or 0
        self.sep_id = self.tokenizer.token_to_id("[SEP]")
        self.tokenizer.enable_padding(pad_id=pad_id, pad_token="[PAD]")
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
        """Unit-length float32 vectors, one row per text, in the order given. Texts are batched by
        length (as sentence-transformers does) so that a batch pads little."""
        order = sorted(range(len(texts)), key=lambda index: -len(texts[index]))
        vectors: np.ndarray | None = None
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            encodings = self.tokenizer.encode_batch([texts[index] for index in batch])
            input_ids = np.array([encoding.ids for encoding in encodings], dtype=np.int64)
            attention_mask = np.array([encoding.attention_mask for encoding in encodings], dtype=np.int64)
            (embedding,) = self.session.run(["embedding"], {"input_ids": input_ids, "attention_mask": attention_mask})
            if vectors is None:
                vectors = np.empty((len(texts), embedding.shape[1]), dtype=np.float32)
            vectors[batch] = embedding
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
        `max_tokens` truncates shorter than the model's own limit (a cheaper passage)."""
        limit = min(max_tokens or self.max_seq_length, self.max_seq_length)
        order = sorted(range(len(texts)), key=lambda index: -len(texts[index]))
        vectors: list[np.ndarray] = [np.empty((0, 0), dtype=np.float32)] * len(texts)
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            encodings = self.tokenizer.encode_batch([texts[index] for index in batch])
            input_ids = np.array([encoding.ids[:limit] for encoding in encodings], dtype=np.int64)
            attention_mask = np.array([encoding.attention_mask[:limit] for encoding in encodings], dtype=np.int64)
            (tokens,) = self.session.run(["tokens"], {"input_ids": input_ids, "attention_mask": attention_mask})
            for row, index in enumerate(batch):
                length = int(attention_mask[row].sum())
                # Truncation at `limit` cuts the final [SEP]; the first token is always [CLS].
                end = length - 1 if encodings[row].ids[length - 1] == self.sep_id else length
                kept = tokens[row, 1:end]
                vectors[index] = kept / np.maximum(np.linalg.norm(kept, axis=1, keepdims=True), 1e-9)
        return vectors
