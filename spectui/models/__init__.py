"""Model files and what they are: where a model comes from (``registry``: local paths or the
embedded default, never a download), its GGUF metadata (``gguf``), its vocabulary as a text
tokenizer (``tokenizer``), its chat template (``chat``) and its frozen fingerprints and the
host's (``artifacts``).

Shared by the embedded engine and the server client, so it sits below both. May import
``spectui.recording`` (the artifact structs), ``spectui.config`` and ``spectui.errors``.
"""
