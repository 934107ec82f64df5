"""``spectui runtime``: the llama-server spectui starts for ``--runtime llama-server``.

``spectui runtime build`` builds it once per llama-cpp-python version into the user cache, from
the llama.cpp that package vendors (``spectui.runtime.build``: the network is needed once, for
the source package), with a progress display on stderr. ``spectui runtime info`` says which
binary a run would start and what it is: path, where it comes from, llama.cpp version and
commit, and the ``--spec-type`` values it accepts (from its ``--help``); it never builds.

``register`` also installs the runtimes' exit hooks (``spectui.runtime.lifetime``): it runs on
the main thread before any command, and any command may start a runtime or a build (a run, a
compare, the dashboard from a worker thread, where signal handlers cannot be installed).
"""

from __future__ import annotations

import argparse
import json
import sys


def register(sub: argparse._SubParsersAction) -> None:
    from spectui.runtime.lifetime import install_exit_hooks

    install_exit_hooks()
    p = sub.add_parser("runtime", help="the llama-server spectui starts: build it once from the vendored llama.cpp, or show which one runs")
    actions = p.add_subparsers(dest="runtime_command", required=True, metavar="{build,info}")
    build = actions.add_parser(
        "build", help="build llama-server from the installed llama-cpp-python's llama.cpp into the user cache (once per version)"
    )
    build.add_argument("--force", action="store_true", help="build again even when this version is built")
    build.add_argument("--static", action="store_true",
                       help="compile llama.cpp whole into the binary instead of linking the installed llama-cpp-python's "
                            "libraries (twice the build time; its own compile of ggml)")
    build.add_argument("--sdist", metavar="FILE", default=None,
                       help="a llama-cpp-python source package (.tar.gz) on disk, instead of downloading it (also: $SPECTUI_LLAMA_CPP_SDIST)")
    build.set_defaults(func=cmd_build)
    info = actions.add_parser("info", help="which llama-server a run starts: path, origin, version, commit, its --spec-type values")
    info.add_argument("--llama-server", metavar="PATH", default=None, help="this binary (else $SPECTUI_LLAMA_SERVER, $PATH, the cached build)")
    info.add_argument("--json", action="store_true", help="one JSON object")
    info.set_defaults(func=cmd_info)


def cmd_build(args: argparse.Namespace) -> int:
    from spectui.runtime.build import build_server, built_server, installed_llama_cpp_python

    version = installed_llama_cpp_python()
    done = None if args.force else built_server(version)
    if done is not None:
        print(f"already built: {done.label}: {done.path} (--force builds again)")
        return 0
    with _BuildProgress(f"compiling llama-server (llama-cpp-python {version})") as progress:
        done = build_server(progress=progress, sdist=args.sdist, force=args.force, static=args.static)
    print(f"built {done.label} in {done.build_seconds / 60:.1f} min: {done.path}")
    return 0


class _BuildProgress:
    """The build's phases (download, unpack, configure) as lines on stderr; the compile as a
    progress bar of its own, so its time left is the compile's, not the download's."""

    def __init__(self, what: str) -> None:
        from spectui.cli.progress import Progress

        self.what = what
        self.bar: Progress | None = None

    def __enter__(self) -> _BuildProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.close()

    def __call__(self, fraction: float, text: str) -> None:
        from spectui.cli.progress import Progress
        from spectui.runtime.cmake import COMPILE_START, STEP

        if not text.startswith(STEP):
            if self.bar is not None:
                self.bar.note(f"spectui: {text}")
            else:
                print(f"spectui: {text}", file=sys.stderr, flush=True)
            return
        if self.bar is None:
            self.bar = Progress(self.what, 100, unit="%", every_s=30.0).__enter__()
        share = max(0.0, (fraction - COMPILE_START) / (1.0 - COMPILE_START))
        self.bar.update(round(share * 100), text[len(STEP):])


def cmd_info(args: argparse.Namespace) -> int:
    from spectui.runtime.build import LINKED, STATIC, find_server, spec_types

    binary = find_server(args.llama_server, build=False)
    types = spec_types(binary.path)
    if args.json:
        doc = {**binary.__dict__, "cmake_args": list(binary.cmake_args), "spec_types": list(types)}
        print(json.dumps(doc, indent=1))
        return 0
    origin = {
        "built": f"spectui's build from llama-cpp-python {binary.llama_cpp_python}'s vendored llama.cpp"
        + (f" ({binary.build_seconds / 60:.1f} min)" if binary.build_seconds else ""),
        "$PATH": "llama-server on $PATH",
    }.get(binary.origin, f"given by {binary.origin}")
    lines = [
        f"llama-server: {binary.path}",
        f"  from: {origin}",
        f"  version: {binary.version or 'unknown'}, commit {binary.commit or 'unknown'}",
        f"  --spec-type: {', '.join(types) if types else 'none listed (a llama-server older than --spec-type)'}",
    ]
    if binary.links:
        lines.append("  links: " + {LINKED: "the installed llama-cpp-python's libraries (the embedded engine's own)",
                                     STATIC: "llama.cpp compiled into it"}.get(binary.links, binary.links))
    if binary.cmake_args:
        lines.append(f"  CMAKE_ARGS: {' '.join(binary.cmake_args)}")
    print("\n".join(lines), file=sys.stdout)
    return 0
