"""Running the project's models without PyTorch: ONNX Runtime sessions over models exported once
per host into VAR_DIR/models (exported_model.py), tokenised with `tokenizers` (sentence_encoder.py).
Only onnx_export.py imports torch, and it runs in a process of its own."""
