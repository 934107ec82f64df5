"""The model picker: a target from the local catalogue, then one of its compatible drafts.

Two steps in one modal: the catalogue's models (name, quant, size, params); Enter on one lists
its compatible drafts (``Catalogue.drafts_for``: same vocabulary, smaller) and every model-free
drafter of the drafter registry (n-gram, suffix, ...); Enter on a draft dismisses with
``(target_path, draft_source)``, ``draft_source`` being a draft model's path or a model-free
drafter's name. Escape goes back a step, then cancels (``None``).

Finding the models reads metadata only, but may touch many files (and hash a vocabulary the
first time): ``spectui.models.catalogue.discover`` runs in a thread worker, the list says
"loading…" meanwhile, and the catalogue's one-line notes (broken files) show below the list.
"""

from __future__ import annotations

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.css.query import NoMatches
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList
from textual.widgets.option_list import Option

from spectui.engine.drafters import drafter_kinds
from spectui.errors import SpectuiError
from spectui.format import counted, size
from spectui.models.catalogue import Catalogue, ModelEntry, discover, locations
from spectui.ui.screens.pickers import _MODAL_CSS

#: the option ids of the model-free drafters: the registry's names behind this prefix
FREE_PREFIX = "free:"


def free_drafter_options() -> list[Option]:
    """One option per model-free drafter in the registry: ``n-gram (no draft model)``."""
    return [Option(f"{k.label} (no draft model)", id=FREE_PREFIX + k.name) for k in drafter_kinds()]


def params_label(n: int) -> str:
    if n <= 0:
        return "?"
    return f"{n / 1e9:.1f}B" if n >= 1e9 else f"{n / 1e6:.0f}M"


def model_row(m: ModelEntry, width: int = 48) -> str:
    name = m.display_name
    name = name if len(name) <= width else "…" + name[-(width - 1) :]
    return f"{name:<{width}} {m.quant or '?':<10} {size(m.size_bytes):>9} {params_label(m.n_params):>6}"


def where_to_put_models(folders: tuple[str, ...] = (), *, embedded: bool = True) -> str:
    """The picker's empty state: only the embedded model (or none) was found; where it looked
    and how to add one."""
    places = list(dict.fromkeys(folder for _source, folder in locations(folders)))
    return "\n".join([
        "Only the embedded model is here. Looked in:" if embedded else "No models found. Looked in:",
        *(f"  {p}" for p in places),
        "Put GGUF files (or MLX model folders) in one of these, set SPECTUI_MODELS to your models",
        "folder, or pass --target PATH; `spectui models DIR` lists what a folder holds.",
    ])


class ModelPicker(ModalScreen[tuple[str, str] | None]):
    """Pick the next run's target, then its draft (a model or a model-free drafter)."""

    DEFAULT_CSS = _MODAL_CSS.format(screen="ModelPicker") + """
ModelPicker #model-notes { color: $text-warning; width: 100%; }
"""
    BINDINGS = [Binding("escape", "back", "Back")]

    def __init__(self, folders: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.folders = folders
        self.catalogue: Catalogue | None = None
        self.error = ""
        #: the target chosen (the drafts step), or None (the targets step)
        self.target: ModelEntry | None = None
        self.drafts: list[ModelEntry] = []

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("Choose a target model", id="model-title", classes="picker-title")
            yield Label("loading…", id="model-status", classes="picker-hint")
            yield OptionList(id="model-list")
            yield Label("", id="model-where", classes="picker-hint")
            yield Label("", id="model-notes")
            yield Label("↑↓ choose · Enter pick · Esc back", classes="picker-hint")

    def on_mount(self) -> None:
        self.query_one("#model-notes", Label).display = False
        self.query_one("#model-where", Label).display = False
        self.query_one(OptionList).focus()
        self.load()

    @work(thread=True, exclusive=True, group="model-catalogue", exit_on_error=False)
    def load(self) -> None:
        """The catalogue, off the UI thread; handed back with ``call_from_thread``."""
        try:
            cat, error = discover(self.folders), ""
        except (SpectuiError, OSError) as exc:
            cat, error = None, str(exc) or type(exc).__name__
        try:
            self.app.call_from_thread(self._loaded, cat, error)
        except RuntimeError:
            pass  # the app exited while the catalogue loaded

    def _loaded(self, cat: Catalogue | None, error: str) -> None:
        if not self.is_attached:
            return  # cancelled while loading
        self.catalogue, self.error = cat, error
        try:
            notes = self.query_one("#model-notes", Label)
        except NoMatches:
            return
        lines = [f"note: {n}" for n in (cat.notes if cat else [])]
        if error:
            lines.insert(0, f"cannot list the models: {error}")
        notes.update("\n".join(lines))
        notes.display = bool(lines)
        self.show_targets()

    # -- the two steps ------------------------------------------------------------------

    def show_targets(self) -> None:
        self.target, self.drafts = None, []
        models = self.catalogue.models if self.catalogue else []
        self.query_one("#model-title", Label).update("Choose a target model")
        status = f"{counted(len(models), 'model')} found · name, quant, size, params" if models else "no models found"
        self.query_one("#model-status", Label).update(status)
        where = self.query_one("#model-where", Label)
        where.display = self.catalogue is not None and all(m.source == "embedded" for m in models)
        if where.display:
            where.update(where_to_put_models(self.folders, embedded=bool(models)))
        ol = self.query_one(OptionList)
        ol.clear_options()
        ol.add_options([Option(model_row(m), id=f"t{i}") for i, m in enumerate(models)])
        if models:
            ol.highlighted = 0
        ol.focus()

    def show_drafts(self, target: ModelEntry) -> None:
        assert self.catalogue is not None
        self.target = target
        self.drafts = self.catalogue.drafts_for(target)
        detail = f" ({target.model_name})" if target.model_name and target.model_name != target.display_name else ""
        self.query_one("#model-title", Label).update(f"Choose a draft for {target.display_name}{detail}")
        n = len(self.drafts)
        self.query_one("#model-status", Label).update(
            f"{n} compatible draft model{'s' if n != 1 else ''} (same vocabulary, smaller)" if n
            else "no compatible draft model here: the model-free drafters need none"
        )
        ol = self.query_one(OptionList)
        ol.clear_options()
        ol.add_options([Option(model_row(d), id=f"d{i}") for i, d in enumerate(self.drafts)])
        ol.add_options(free_drafter_options())
        ol.highlighted = 0
        ol.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if self.catalogue is None:
            return
        if self.target is None:
            self.show_drafts(self.catalogue.models[event.option_index])
            return
        option_id = event.option.id or ""
        free = option_id.startswith(FREE_PREFIX)
        draft = option_id.removeprefix(FREE_PREFIX) if free else self.drafts[event.option_index].path
        self.dismiss((self.target.path, draft))

    def action_back(self) -> None:
        if self.target is not None:
            self.show_targets()
        else:
            self.workers.cancel_group(self, "model-catalogue")
            self.dismiss(None)
