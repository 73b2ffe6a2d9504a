"""scripts/jemalloc.sh, the allocator `make distill-demo` trains on: the path it prints, preloaded, is jemalloc in
the process; where the library is absent it prints nothing, says how to install it and exits 1. Without
--install it never installs anything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "jemalloc.sh"


def test_the_printed_library_is_jemalloc_once_preloaded_or_its_absence_is_one_line():
    found = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True)
    if found.returncode == 0:
        lib = found.stdout.strip()
        assert Path(lib).is_file() and found.stderr == ""
        maps = subprocess.run([sys.executable, "-c", "print(open('/proc/self/maps').read())"], check=True,
                              capture_output=True, text=True, env={"LD_PRELOAD": lib}).stdout
        assert "libjemalloc" in maps
    else:
        assert found.returncode == 1 and found.stdout == ""
        assert found.stderr.count("\n") == 1 and "apt-get install libjemalloc2" in found.stderr


def test_without_jemalloc_on_the_search_paths_it_says_so(tmp_path):
    # no ldconfig, and the script's globs pointed at an empty folder: what a machine without the library sees
    text = SCRIPT.read_text().replace("/usr/lib/*/libjemalloc.so.2 /usr/lib64/libjemalloc.so.2 /usr/local/lib/libjemalloc.so.2",
                                      f"{tmp_path}/libjemalloc.so.2")
    assert text != SCRIPT.read_text()
    copy = tmp_path / "jemalloc.sh"
    copy.write_text(text)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("awk", "head", "ls", "id"):
        (bin_dir / tool).symlink_to(subprocess.run(["bash", "-c", f"command -v {tool}"], capture_output=True,
                                                   text=True, check=True).stdout.strip())
    found = subprocess.run(["/bin/bash", str(copy)], capture_output=True, text=True, env={"PATH": str(bin_dir)})
    assert found.returncode == 1 and found.stdout == ""
    assert "jemalloc not found" in found.stderr and "apt-get install libjemalloc2" in found.stderr
