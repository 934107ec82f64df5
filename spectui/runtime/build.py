"""llama-server: found where the user has one, else built once from the llama.cpp that the
installed llama-cpp-python vendors.

Where the binary comes from, first match wins (``find_server``):

1. an explicit path (``--llama-server PATH``, or ``$SPECTUI_LLAMA_SERVER``);
2. ``llama-server`` on ``$PATH`` (Homebrew's on a Mac, a distribution's package);
3. spectui's own build in the user cache: ``<cache>/llama.cpp/<llama-cpp-python version>/build/bin``,
   made from the very llama.cpp revision the embedded engine runs, so embedded and runtime runs
   compare on the same kernels.

The build (``build_server``) needs the network once: PyPI carries llama-cpp-python as a source
package only, with llama.cpp under ``vendor/llama.cpp`` and its git metadata (a shallow clone)
under ``.git/modules/vendor/llama.cpp``; both are unpacked with their layout kept so llama.cpp's
CMake finds the commit and ``llama-server --version`` names it. ``$SPECTUI_LLAMA_CPP_SDIST`` (or
``spectui runtime build --sdist FILE``) names a source package already on disk instead. CMake
runs offline (no prebuilt web UI, no OpenSSL, no tests or examples), builds the one target
under ``nice`` with two jobs (``$CMAKE_BUILD_PARALLEL_LEVEL`` overrides), and takes
``$CMAKE_ARGS`` as llama-cpp-python's own build does (``-DGGML_CUDA=on`` on a CUDA machine).
It links the libraries llama-cpp-python installed (libllama, libggml*, libmtmd: the embedded
engine's own) and compiles only what lies between them and llama-server (``linked.py``), about
half the time of compiling llama.cpp whole, which it does instead when linking does not fit.
A record beside the build (``spectui-build.json``) keeps the version, commit, flags, what it
links and its time; a second process that asks meanwhile waits on a lock and then uses the
finished build.

``source_tree`` is shared with ``benchmarks/native_tools.py``, which builds llama.cpp's other
programs from the same unpacked source (``cmake.py`` runs CMake for both).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shlex
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from spectui import file_kinds, storage, subprocesses
from spectui.paths import cache_dir
from spectui.runtime.archive import UnsafeMember, extract_data
from spectui.runtime.cmake import BuildError, ProgressFn, cmake_build, run_logged
from spectui.runtime.leftovers import remove_leftovers
from spectui.runtime.linked import NotLinkable, build_linked, installed_libraries, refresh_libraries, shared_flags
from spectui.runtime.ownership import require_owned
from spectui.subprocesses import python_argv

SERVER = "llama-server"
#: The user's own binary, when no ``--llama-server`` is given.
SERVER_ENV = "SPECTUI_LLAMA_SERVER"
#: A llama-cpp-python source package already on disk (an offline machine).
SDIST_ENV = "SPECTUI_LLAMA_CPP_SDIST"
#: What makes a configure run offline and short (llama.cpp's tools/server CMakeLists): the web UI is
#: otherwise downloaded during the build.
OFFLINE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_CURL=OFF",
    "-DBUILD_SHARED_LIBS=OFF",  # static: the binary needs no libllama from elsewhere
)
RECORD_NAME = "spectui-build.json"
#: what a build record's ``links`` says: the installed llama-cpp-python's shared libraries
#: (``linked.py``), or llama.cpp compiled whole into the binary
LINKED = "llama-cpp-python"
STATIC = "static"
_VENDOR = "vendor/llama.cpp"
_GITDIR = ".git/modules/vendor/llama.cpp"


_RECORD_KIND = file_kinds.json_kind("spectui's llama-server build record", lambda doc: isinstance(doc, dict) and "llama_cpp_python" in doc)


@dataclass(frozen=True)
class ServerBinary:
    """A llama-server program spectui can start, and what it is."""

    path: str
    origin: str  # "--llama-server", "$SPECTUI_LLAMA_SERVER", "$PATH" or "built"
    version: str = ""  # as the binary says it ("0.5.0-dev build 1", "b4521"; "" unknown)
    commit: str = ""  # llama.cpp's short commit ("" unknown)
    #: the llama-cpp-python version whose source a "built" binary comes from
    llama_cpp_python: str = ""
    build_seconds: float = 0.0
    cmake_args: tuple[str, ...] = field(default=())
    #: a "built" binary's llama.cpp libraries: ``LINKED`` (the installed llama-cpp-python's,
    #: the embedded engine's own) or ``STATIC`` (compiled into it); "" unknown
    links: str = ""

    @property
    def label(self) -> str:
        """``llama-server 0.5.0-dev build 1 (0c1e570)``: what a header or a line names."""
        return f"{SERVER} {self.version or 'of unknown version'}" + (f" ({self.commit})" if self.commit else "")


def installed_llama_cpp_python() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("llama-cpp-python")
    except PackageNotFoundError:
        raise BuildError("llama-cpp-python is not installed: nothing to build llama-server from (pass --llama-server PATH)") from None


def build_root(version: str | None = None, cache: Path | None = None) -> Path:
    """``<cache>/llama.cpp/<version>``: the unpacked source and the builds of one version
    (``cache``: another cache folder than the user's, e.g. the tests' view of it)."""
    return (cache or cache_dir()) / "llama.cpp" / (version or installed_llama_cpp_python())


def server_build_dir(version: str | None = None, cache: Path | None = None) -> Path:
    return build_root(version, cache) / "build"


# -- finding -----------------------------------------------------------------------------------


def find_server(
    explicit: str | None = None, *, build: bool = True, progress: ProgressFn | None = None, cache: Path | None = None
) -> ServerBinary:
    """The llama-server to run: ``explicit``, ``$SPECTUI_LLAMA_SERVER``, ``$PATH``, the cached
    build, else (``build``) a new build. ``BuildError`` says which step failed."""
    for given, origin in ((explicit, "--llama-server"), (os.environ.get(SERVER_ENV), f"${SERVER_ENV}")):
        if given:
            path = Path(given).expanduser()
            if path.is_dir():
                path = path / SERVER
            if not path.is_file() or not os.access(path, os.X_OK):
                raise BuildError(f"{origin} {given}: no executable llama-server there")
            return describe(str(path.resolve()), origin)
    on_path = shutil.which(SERVER)
    if on_path:
        return describe(on_path, "$PATH")
    built = built_server(cache=cache)
    if built is not None:
        return built
    if not build:
        raise BuildError("no llama-server found (none given, none on $PATH, none built): run `spectui runtime build`")
    return build_server(progress=progress, cache=cache)


def describe(path: str, origin: str) -> ServerBinary:
    """The binary at ``path`` as it says it is; one of spectui's builds (named by path, or on
    ``$PATH``) also as its build record says (what it links, its source, its time)."""
    version, commit = probe_version(path)
    return ServerBinary(path=path, origin=origin, version=version, commit=commit, **_built_as(read_record(Path(path).parent.parent) or {}))


def _built_as(record: dict) -> dict:
    """What a build record adds to a binary's description."""
    return {
        "llama_cpp_python": str(record.get("llama_cpp_python", "")), "build_seconds": float(record.get("build_seconds", 0.0)),
        "cmake_args": tuple(record.get("cmake_args", ())), "links": str(record.get("links", "")),
    }


def built_server(version: str | None = None, *, cache: Path | None = None) -> ServerBinary | None:
    """spectui's cached build for ``version`` (the installed llama-cpp-python), if it is done."""
    build = server_build_dir(version, cache)
    binary = build / "bin" / SERVER
    record = read_record(build)
    if record is None or not binary.is_file():
        return None
    # run only while it is the user's alone: someone who could write it could run code as them
    require_owned([build.parent, build, binary.parent, *sorted(binary.parent.iterdir())], "the cached llama-server build",
                  f"remove {build} and run `spectui runtime build`", error=BuildError)
    if record.get("links") == LINKED and (libraries := installed_libraries()) is not None:
        refresh_libraries(binary.parent, libraries)
    version_said, commit = str(record.get("version", "")), str(record.get("commit", ""))
    if not version_said:  # a record written before this version of spectui read the new format
        version_said, commit = probe_version(str(binary))[0], commit or probe_version(str(binary))[1]
    return ServerBinary(path=str(binary), origin="built", version=version_said, commit=commit, **_built_as(record))


def read_record(build: Path) -> dict | None:
    try:
        doc = json.loads((build / RECORD_NAME).read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


#: ``version: 0.5.0-dev (build 1, commit 0c1e570)`` (llama.cpp since it named releases) or
#: ``version: 4521 (5a2b1c3)`` (older builds, Homebrew's among them)
_VERSION_NEW = re.compile(r"version:\s*(\S+)\s*\(build\s*(\d+),\s*commit\s*([0-9a-fA-F]+|unknown)\)")
_VERSION_OLD = re.compile(r"version:\s*(\d+)\s*\(([0-9a-fA-F]+|unknown)\)")


def probe_version(path: str) -> tuple[str, str]:
    """(version, short commit) from ``llama-server --version``: ("0.5.0-dev build 1", "0c1e570")
    or ("b4521", "5a2b1c3"); empty strings for what it does not say."""
    text = _run_quietly([path, "--version"])
    m = _VERSION_NEW.search(text)
    if m:
        version, commit = f"{m.group(1)} build {m.group(2)}", m.group(3)
    else:
        m = _VERSION_OLD.search(text)
        if not m:
            return "", ""
        version, commit = f"b{m.group(1)}", m.group(2)
    return version, ("" if commit == "unknown" else commit)


def spec_types(path: str) -> tuple[str, ...]:
    """The ``--spec-type`` values this binary accepts, read from its ``--help`` (empty for a
    llama-server older than ``--spec-type``)."""
    text = _run_quietly([path, "--help"])
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("--spec-type"):
            values = stripped[len("--spec-type"):].split(None, 1)[0] if stripped[len("--spec-type"):].strip() else ""
            names = [v for v in re.split(r"[\[\]|,]", values) if re.fullmatch(r"[a-z0-9][a-z0-9-]*", v)]
            return tuple(names)
    return ()


def _run_quietly(cmd: list[str]) -> str:
    try:
        proc = subprocesses.run(cmd, capture_output=True, text=True, errors="replace", timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise BuildError(f"{cmd[0]} {cmd[1]}: {exc}") from None
    return proc.stdout + proc.stderr


# -- building ----------------------------------------------------------------------------------


def build_server(
    *, progress: ProgressFn | None = None, sdist: str | None = None, force: bool = False, cache: Path | None = None,
    static: bool = False,
) -> ServerBinary:
    """Build llama-server from the installed llama-cpp-python's vendored llama.cpp into the
    user cache (once per version; ``force`` builds again), linked to the installed libraries
    unless ``static`` asks for llama.cpp compiled whole into it. Returns the built binary."""
    version = installed_llama_cpp_python()
    build = server_build_dir(version, cache)
    say = progress or (lambda _f, _t: None)
    storage.prepare_dir(build.parent)
    with storage.locked(build.parent / "build-lock"):
        if not force:
            done = built_server(version, cache=cache)
            if done is not None:  # another process built it while this one waited
                return done
        started = time.monotonic()
        source, commit = source_tree(version, progress=say, sdist=sdist, cache=cache)
        extra = tuple(shlex.split(os.environ.get("CMAKE_ARGS", "")))
        shutil.rmtree(build, ignore_errors=True)  # a build of other settings leaves nothing to mix in
        links = None if static else _build_linked(source, build, extra, say)
        if links is None:
            cmake_build(source, build, [SERVER], [*OFFLINE_FLAGS, *extra], progress=say)
        binary = build / "bin" / SERVER
        if not binary.is_file():
            raise BuildError(f"the build ended without {binary}; see {build / 'build.log'}")
        number, built_commit = probe_version(str(binary))
        seconds = time.monotonic() - started
        record = {
            "llama_cpp_python": version, "version": number, "commit": built_commit or commit[:7],
            "commit_full": commit, "cmake_args": list(extra), "flags": shared_flags(OFFLINE_FLAGS) if links else list(OFFLINE_FLAGS),
            "links": links or STATIC, "build_seconds": round(seconds, 1),
            "built_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        }
        storage.write_atomic(build / RECORD_NAME, json.dumps(record, indent=1) + "\n", _RECORD_KIND, own_dir=False)
        say(1.0, f"built in {seconds / 60:.1f} min")
    built = built_server(version, cache=cache)
    if built is None:
        raise BuildError(f"the build finished but left no llama-server under {server_build_dir(version, cache)}")
    return built


def _build_linked(source: Path, build: Path, extra: Sequence[str], say: ProgressFn) -> str | None:
    """llama-server linked to the installed llama-cpp-python's libraries (``linked.py``): the
    ``links`` value of the record, or None, the build folder emptied, when it cannot be (said in
    a line: the whole static build follows)."""
    libraries = installed_libraries()
    if libraries is None:
        say(0.05, "llama-cpp-python installed no shared libraries to link: building llama.cpp whole")
        return None
    try:
        build_linked(source, build, [*OFFLINE_FLAGS, *extra], SERVER, libraries, progress=say)
        if probe_version(str(build / "bin" / SERVER))[0]:
            return LINKED
        reason = "the linked llama-server did not start"
    except (NotLinkable, BuildError) as exc:
        reason = str(exc)
    say(0.05, f"linking llama-cpp-python's libraries did not work ({reason}): building llama.cpp whole")
    shutil.rmtree(build, ignore_errors=True)
    return None


def source_tree(
    version: str, *, progress: ProgressFn | None = None, sdist: str | None = None, cache: Path | None = None
) -> tuple[Path, str]:
    """The unpacked ``vendor/llama.cpp`` of llama-cpp-python ``version`` (fetched once) and
    the llama.cpp commit it vendors ("" when the package keeps no git metadata)."""
    say = progress or (lambda _f, _t: None)
    root = build_root(version, cache) / "sdist"
    source = root / _VENDOR
    if not (source / "CMakeLists.txt").exists():
        sdist = sdist or os.environ.get(SDIST_ENV)
        if sdist:
            say(0.02, f"unpacking {os.path.basename(sdist)}")
            _unpack(Path(sdist), root)
        else:
            say(0.0, f"downloading the llama-cpp-python {version} source package (once)")
            with tempfile.TemporaryDirectory(prefix="spectui-sdist-") as tmp:
                archive = _download(version, Path(tmp), root.parent / "pip-download.log")
                say(0.03, f"unpacking {archive.name}")
                _unpack(archive, root)
    head = root / _GITDIR / "HEAD"
    try:
        commit = head.read_text().strip()
    except OSError:
        commit = ""
    return source, commit if re.fullmatch(r"[0-9a-f]{40}", commit) else ""


def _download(version: str, folder: Path, log: Path) -> Path:
    # a local version label (0.3.36+cu124, an index's own build) is not on PyPI: its base is.
    # --no-binary names the one package: with ":all:" pip would also build its build tools
    # (CMake among them) from source to read the package's metadata
    public = version.split("+", 1)[0]
    # isolated (``python -I``, a private working folder): a ``pip/`` in the user's folder is not pip
    run_logged(python_argv("-m", "pip", "download", "--no-deps", "--no-binary", "llama-cpp-python", "-d", str(folder.absolute()),
                           f"llama-cpp-python=={public}"), log, "pip download")
    found = sorted(folder.glob("llama_cpp_python-*.tar.gz"))
    if not found:
        raise BuildError(f"pip download gave no llama-cpp-python source package; see {log}")
    return found[0]


#: a source package being unpacked: ``.unpack-<pid>-<random>`` (``.unpack-<random>`` before
#: spectui named the process in it)
_UNPACKING = re.compile(r"\.unpack-(?:(?P<pid>\d+)-)?[\w-]+")


def _unpack(archive: Path, dest: Path) -> None:
    """``vendor/llama.cpp`` and its git metadata from the source package, their layout kept
    (the submodule's ``.git`` file points at ``../../.git/modules/vendor/llama.cpp``). An
    unpacking a crashed run left is removed first (``spectui.runtime.leftovers``)."""
    if not archive.is_file():
        raise BuildError(f"source package not found: {archive}")
    parent = storage.prepare_dir(dest.parent)
    remove_leftovers(parent, _UNPACKING)
    staging = Path(tempfile.mkdtemp(prefix=f".unpack-{os.getpid()}-", dir=parent))
    try:
        with tarfile.open(archive) as tar:
            top = tar.getmembers()[0].name.split("/", 1)[0]
            wanted = (f"{top}/{_VENDOR}/", f"{top}/{_GITDIR}/")
            members = [m for m in tar.getmembers() if m.name.startswith(wanted)]
            if not any(m.name.startswith(wanted[0]) for m in members):
                raise BuildError(f"{archive.name} holds no {_VENDOR}: not a llama-cpp-python source package")
            extract_data(tar, staging, members)
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(staging / top, dest)
    except UnsafeMember as exc:
        raise BuildError(f"unpacking {archive.name} refused: {exc}") from None
    except (tarfile.TarError, OSError) as exc:
        raise BuildError(f"unpacking {archive.name} failed: {exc}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def record_of(binary: ServerBinary) -> dict:
    """The binary as plain data (``spectui runtime info --json``, the recording's header)."""
    return asdict(binary)
