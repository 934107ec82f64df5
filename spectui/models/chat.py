"""Turning the user's prompt into the exact text and tokens the model sees."""

from __future__ import annotations

from functools import lru_cache

from jinja2 import Template, TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from spectui.errors import SpectuiError


def _raise(message: str) -> None:
    raise TemplateError(message)


@lru_cache(maxsize=8)
def _compiled(template: str) -> Template:
    """The template compiled once a process (compiling costs milliseconds; a workload renders
    the same template for every request, and a compiled template renders from any thread)."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = _raise
    return env.from_string(template)


def apply_chat_template(
    template: str, prompt: str | list[dict[str, str]], *, bos_token: str = "", eos_token: str = ""
) -> str:
    """Render the GGUF's chat template (Jinja, as Hugging Face writes them) for one user turn
    (``prompt``) or a whole conversation (a list of ``{"role", "content"}`` messages ending
    with the user's), followed by the assistant's generation prompt.

    The template runs in Jinja's immutable sandbox: it comes from a model file, not from us.
    """
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
    try:
        return _compiled(template).render(
            messages=messages,
            add_generation_prompt=True,
            bos_token=bos_token,
            eos_token=eos_token,
        )
    except TemplateError as exc:
        raise SpectuiError(f"the model's chat template failed: {exc} (use --raw to send the prompt as is)") from None
