"""llama-server linked to the installed llama-cpp-python's libraries (``spectui.runtime.linked``).

Fast: the build plan read from a target graph in CMake's own format (what is compiled, in which
order, what the installed libraries stand for) and the refusals that send a build back to
compiling llama.cpp whole. Then a small CMake project with llama.cpp's shape (a shared
``llama`` library, a static library over it, an executable), its library built and "installed"
first, then the linked build compiles the rest and nothing of ``llama``, and the binary runs
on the installed copy; a project it cannot link leaves an empty build folder and the static
build's cue (seconds: three one-line sources). The real llama-server is built this way by the session fixture
(``test_build.py`` checks its record).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from spectui.runtime import build as build_mod
from spectui.runtime.linked import LinkPlan, NotLinkable, _objects, build_linked, check_links, plan, read_graph

# CMake's --graphviz output for one target, trimmed (labels with an alias on a second line,
# interface and system nodes, a custom target, edges written more than once)
GRAPH = r'''digraph "llama-server" {
node [
  fontsize = "12"
];
    "node49" [ label = "llama-server", shape = egg ];
    "node20" [ label = "llama-server-impl", shape = doubleoctagon ];
    "node49" -> "node20" [ style = dotted ] // llama-server -> llama-server-impl
    "node0" [ label = "cpp-httplib\n(vendor::cpp-httplib)", shape = octagon ];
    "node20" -> "node0"  // llama-server-impl -> cpp-httplib
    "node1" [ label = "Threads::Threads", shape = pentagon ];
    "node0" -> "node1" [ style = dotted ] // cpp-httplib -> Threads::Threads
    "node21" [ label = "llama-ui", shape = octagon ];
    "node20" -> "node21"  // llama-server-impl -> llama-ui
    "node22" [ label = "llama-ui-assets", shape = box ];
    "node21" -> "node22"  // llama-ui -> llama-ui-assets
    "node14" [ label = "llama-common", shape = doubleoctagon ];
    "node20" -> "node14"  // llama-server-impl -> llama-common
    "node14" -> "node0" [ style = dotted ] // llama-common -> cpp-httplib
    "node11" [ label = "llama", shape = doubleoctagon ];
    "node14" -> "node11"  // llama-common -> llama
    "node2" [ label = "ggml\n(ggml::ggml)", shape = doubleoctagon ];
    "node11" -> "node2"  // llama -> ggml
    "node6" [ label = "/usr/lib/gcc/x86_64-linux-gnu/12/libgomp.so", shape = septagon ];
    "node2" -> "node6" [ style = dashed ] // ggml -> libgomp
    "node23" [ label = "mtmd", shape = doubleoctagon ];
    "node20" -> "node23"  // llama-server-impl -> mtmd
    "node23" -> "node11"  // mtmd -> llama
    "node26" [ label = "vendor-hash\n(vendor::hash)", shape = octagon ];
    "node23" -> "node26" [ style = dotted ] // mtmd -> vendor-hash
}
'''


def _libraries(folder: Path, *names: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_bytes(b"\x7fELF")
    return folder


def test_the_plan_compiles_what_lies_above_the_installed_libraries_dependencies_first(tmp_path):
    (tmp_path / "g.dot").write_text(GRAPH)
    nodes, edges = read_graph(tmp_path / "g.dot")
    assert nodes["node0"] == ("cpp-httplib", "octagon") and edges["node14"] == ["node0", "node11"]
    libs = _libraries(tmp_path / "lib", "libllama.so", "libllama.so.0.5.0", "libggml.so.0.25.3", "libmtmd.so.0.5.0")
    p = plan(tmp_path / "g.dot", "llama-server", libs)
    # nothing below llama or mtmd (ggml, vendor-hash: inside the installed files); the custom
    # target before the library that needs it; every target once
    assert p.installed == ("llama", "mtmd")
    assert p.compile == ("cpp-httplib", "llama-ui-assets", "llama-ui", "llama-common", "llama-server-impl", "llama-server")


def test_without_the_libraries_the_build_is_not_linkable(tmp_path):
    (tmp_path / "g.dot").write_text(GRAPH)
    # the installed package has other libraries only (a static one, an unrelated name)
    libs = _libraries(tmp_path / "lib", "libllama-common.a", "libfoo.so")
    with pytest.raises(NotLinkable, match="none of the libraries llama-server links"):
        plan(tmp_path / "g.dot", "llama-server", libs)
    with pytest.raises(NotLinkable, match="no target graph"):
        plan(tmp_path / "missing.dot", "llama-server", libs)
    with pytest.raises(NotLinkable, match="not in CMake's target graph"):
        plan(tmp_path / "g.dot", "llama-cli", libs)


def test_a_library_file_the_link_names_and_the_package_lacks_is_said_before_compiling(tmp_path):
    build = tmp_path / "build"
    link = build / "tools" / "server" / "CMakeFiles" / "llama-server.dir" / "link.txt"
    link.parent.mkdir(parents=True)
    link.write_text("/usr/bin/c++ -O3 main.cpp.o -o ../../bin/llama-server ../../bin/libllama-server-impl.so "
                    "../../bin/libllama.so.0.5.0 ../../bin/libggml-cpu.so.0.25.3 /usr/lib/libgomp.so -lpthread\n")
    p = LinkPlan(installed=("llama",), compile=("llama-server-impl", "llama-server"))
    libs = _libraries(tmp_path / "lib", "libllama.so.0.5.0", "libggml-cpu.so.0.25.3")
    check_links(build, p, libs)  # what the compile makes, what the package has, system libraries: fine
    (libs / "libggml-cpu.so.0.25.3").unlink()  # a package built with other settings
    with pytest.raises(NotLinkable, match="llama-server links libggml-cpu.so.0.25.3, which the installed"):
        check_links(build, p, libs)


# -- a real CMake project of llama.cpp's shape ------------------------------------------------------

PROJECT = {
    "CMakeLists.txt": """cmake_minimum_required(VERSION 3.14)
project(shape CXX)
set(CMAKE_RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
set(CMAKE_LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
add_library(llama llama.cpp)
set_target_properties(llama PROPERTIES VERSION 0.5.0 SOVERSION 0)
add_library(common STATIC common.cpp)
target_link_libraries(common PUBLIC llama)
add_executable(llama-server main.cpp)
target_link_libraries(llama-server PRIVATE common)
""",
    "llama.cpp": 'int llama_answer() { return 42; }\n',
    "common.cpp": "int llama_answer();\nint common_answer() { return llama_answer() + 1; }\n",
    "main.cpp": '#include <cstdio>\nint common_answer();\n'
                'int main() { std::printf("version: 0.5.0-dev (build %d, commit 0c1e570)\\n", common_answer()); }\n',
}


@pytest.fixture
def project(tmp_path) -> Path:
    if shutil.which("cmake") is None or shutil.which("c++") is None:
        pytest.skip("cmake and a C++ compiler build this test's project")
    source = tmp_path / "src"
    source.mkdir()
    for name, text in PROJECT.items():
        (source / name).write_text(text)
    return source


def test_a_linked_build_compiles_nothing_of_the_installed_library_and_runs_on_it(project, tmp_path):
    # the "installed" library: the project built whole once (shared), its libllama files kept
    whole = tmp_path / "whole"
    subprocess.run(["cmake", "-S", str(project), "-B", str(whole), "-DBUILD_SHARED_LIBS=ON"], check=True, capture_output=True)
    subprocess.run(["cmake", "--build", str(whole), "--target", "llama"], check=True, capture_output=True)
    libs = tmp_path / "site-packages" / "lib"
    libs.mkdir(parents=True)
    for f in (whole / "bin").glob("libllama.so*"):
        shutil.copy2(f, libs / f.name, follow_symlinks=False)

    build = tmp_path / "build"
    p = build_linked(project, build, ["-DBUILD_SHARED_LIBS=OFF"], "llama-server", libs)
    assert p == LinkPlan(installed=("llama",), compile=("common", "llama-server"))
    assert not list(build.glob("**/CMakeFiles/llama.dir/*.o"))  # llama was not compiled again
    assert (build / "bin" / "libllama.so.0.5.0").is_file()
    out = subprocess.run([str(build / "bin" / "llama-server")], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "version: 0.5.0-dev (build 43, commit 0c1e570)"  # 42 from the installed library, + 1


def test_a_project_it_cannot_link_leaves_an_empty_folder_for_the_whole_build(project, tmp_path, monkeypatch):
    libs = _libraries(tmp_path / "lib", "libsomething-else.so.1")
    monkeypatch.setattr(build_mod, "installed_libraries", lambda: libs)
    said: list[str] = []
    build = tmp_path / "build"
    assert build_mod._build_linked(project, build, (), lambda _f, text: said.append(text)) is None
    assert not build.exists()
    assert "linking llama-cpp-python's libraries did not work (none of the libraries llama-server links" in said[-1]
    assert said[-1].endswith("building llama.cpp whole")


def test_each_targets_share_of_the_progress_is_its_count_of_sources(tmp_path):
    commands = [{"directory": str(tmp_path / "common"), "file": f"{name}.cpp",
                 "command": f"/usr/bin/c++ -O3 -o CMakeFiles/{target}.dir/{name}.cpp.o -c {name}.cpp"}
                for target, name in [("llama-common", "arg"), ("llama-common", "chat"), ("llama-common-base", "build-info"),
                                     ("server-context", "server-task")]]
    (tmp_path / "compile_commands.json").write_text(json.dumps(commands))
    assert _objects(tmp_path, ["llama-common", "llama-common-base", "server-context", "llama-ui-assets"]) == [2, 1, 1, 1]
    assert _objects(tmp_path / "nowhere", ["a", "b"]) == [1, 1]
