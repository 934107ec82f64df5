"""``spectui models``: the embedded default model and where it is (no model is loaded)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    sub.add_parser("models", help="show the embedded default model and where it is").set_defaults(func=cmd_models)


def cmd_models(_args: argparse.Namespace) -> int:
    from spectui.models.gguf import read_gguf
    from spectui.models.registry import embedded_model_path

    path = embedded_model_path()
    info = read_gguf(path)
    print(f"smollm2 (default)  {info.name}  {info.architecture}  {info.quant}  {info.n_params / 1e6:.0f}M params  {path}")
    return 0
