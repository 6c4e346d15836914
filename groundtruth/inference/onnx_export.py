"""Exports a sentence-transformers model directory (transformer, mean pooling, normalisation) to
ONNX. The only module of the inference package that imports torch: it runs in a process of its
own (`python -m groundtruth.inference.onnx_export MODEL_DIR OUT_DIR`), started by
`exported_model_ensure`, so that no web, MCP or stream process ever imports torch.

The graph takes `input_ids` and `attention_mask` (int64, batch x tokens) and returns `embedding`
(float32, batch x dimension, unit length): the pooling and normalisation sentence-transformers runs
after the transformer are part of the graph, so the runtime only tokenises. It also returns
`tokens` (float32, batch x tokens x dimension): the transformer's token vectors before pooling,
which the relevance judge compares token by token (late interaction, `groundtruth/judge/`). A
caller that asks only for `embedding` pays nothing for them.

The legacy TorchScript exporter (`dynamo=False`) is used: it runs offline in about 12 s on an
idle 2-core machine and gives the same vectors as sentence-transformers (min cosine 0.9999996 on
texts of 1 to 300+ tokens, tests/groundtruth/test_inference.py). The dynamo exporter of torch 2.13, tried with
the same module and dynamic batch and token dimensions, exported in 15-28 s but its graph gave
other vectors on padded batches (min cosine -0.07) and, with the output named `embedding`, was
refused by ONNX Runtime (a duplicate name).

Weights are written to a separate file, each tensor at an offset aligned to the page size, so
that ONNX Runtime maps them from the file instead of copying them: every process on the host then
shares one copy in the page cache.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

WEIGHTS_FILE = "weights.bin"
GRAPH_FILE = "model.onnx"
_PAGE = 4096


def model_export(*, model_dir: Path, out_dir: Path) -> None:
    """Writes GRAPH_FILE and WEIGHTS_FILE into out_dir (which must exist)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    import onnx
    import torch
    from transformers import AutoModel
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    # Eager attention traces to plain MatMul/Softmax; the SDPA path bakes a Python branch into the trace.
    transformer = AutoModel.from_pretrained(str(model_dir), attn_implementation="eager").eval()

    class PooledEncoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            tokens = self.transformer(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(tokens.dtype)
            # sentence-transformers' Pooling (mean over the attention mask) and Normalize.
            mean = (tokens * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2.0, dim=1), tokens

    sample = torch.ones((2, 8), dtype=torch.int64)
    graph_path = out_dir / GRAPH_FILE
    with torch.inference_mode():
        torch.onnx.export(
            PooledEncoder().eval(),
            (sample, sample),
            str(graph_path),
            input_names=["input_ids", "attention_mask"],
            output_names=["embedding", "tokens"],
            dynamic_axes={
                "input_ids": {0: "batch", 1: "tokens"},
                "attention_mask": {0: "batch", 1: "tokens"},
                "tokens": {0: "batch", 1: "tokens"},
            },
            opset_version=17,
            dynamo=False,
        )
    model = onnx.load(str(graph_path))
    _weights_to_aligned_file(model, out_dir / WEIGHTS_FILE)
    onnx.save_model(model, str(graph_path))


def _weights_to_aligned_file(model: object, weights_path: Path) -> None:
    """Moves every large initializer's bytes into weights_path at page-aligned offsets (onnx's own
    external-data writer packs them without alignment, which makes ONNX Runtime copy them)."""
    from onnx import TensorProto

    with weights_path.open("wb") as weights:
        for tensor in model.graph.initializer:  # type: ignore[attr-defined]
            if not tensor.HasField("raw_data") or len(tensor.raw_data) < _PAGE:
                continue
            offset = -weights.tell() % _PAGE
            weights.write(b"\0" * offset)
            start = weights.tell()
            weights.write(tensor.raw_data)
            tensor.ClearField("raw_data")
            tensor.data_location = TensorProto.EXTERNAL
            del tensor.external_data[:]
            length = weights.tell() - start
            for key, value in (("location", WEIGHTS_FILE), ("offset", str(start)), ("length", str(length))):
                entry = tensor.external_data.add()
                entry.key, entry.value = key, value


if __name__ == "__main__":
    model_export(model_dir=Path(sys.argv[1]), out_dir=Path(sys.argv[2]))
    print(json.dumps({"exported": sys.argv[2]}))
