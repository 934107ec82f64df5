"""A linked llama-server runs the libraries llama-cpp-python has now, not copies of older ones."""

from __future__ import annotations

from pathlib import Path

from spectui.runtime.linked import refresh_libraries


def test_a_reinstalled_package_at_the_same_version_is_copied_again(tmp_path: Path) -> None:
    package, bin_dir = tmp_path / "lib", tmp_path / "bin"
    package.mkdir()
    bin_dir.mkdir()
    for name in ("libggml-cpu.so", "libllama.so"):
        (package / name).write_bytes(b"built with AMX")
        (bin_dir / name).write_bytes(b"built with AMX")
    (package / "README").write_text("not a library")
    assert refresh_libraries(bin_dir, package) == []
    (package / "libggml-cpu.so").write_bytes(b"built without AMX!")  # same version, other flags
    assert refresh_libraries(bin_dir, package) == ["libggml-cpu.so"]
    assert (bin_dir / "libggml-cpu.so").read_bytes() == b"built without AMX!"
    assert not (bin_dir / "README").exists()
