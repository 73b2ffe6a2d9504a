"""The llama.cpp build switches are stated once in spirit: the Makefile's install-local, the install hint
that `ark.llm.local_server` prints and the comment in requirements-local.txt name the same CMake arguments."""

from __future__ import annotations

import re
from pathlib import Path

from ark.llm.local_server import INSTALL_HINT, LLAMA_CMAKE_ARGS

ROOT = Path(__file__).resolve().parents[1]


def test_makefile_builds_llama_cpp_with_the_switches_of_ark_local_server():
    make = (ROOT / "Makefile").read_text()
    assert re.search(r"^LLAMA_CMAKE_ARGS := (.*)$", make, re.M).group(1) == LLAMA_CMAKE_ARGS
    recipe = make.split("$(VENV)/.local:", 1)[1].split("\n\n", 1)[0]
    assert 'CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)"' in recipe and "requirements-local.txt" in recipe


def test_install_hint_and_requirements_comment_name_the_same_switches():
    assert f'CMAKE_ARGS="{LLAMA_CMAKE_ARGS}"' in INSTALL_HINT
    comment = "\n".join(line for line in (ROOT / "requirements-local.txt").read_text().splitlines()
                        if line.startswith("#"))
    assert re.findall(r"-D\w+=\w+", comment) == LLAMA_CMAKE_ARGS.split()
    assert "-DLLAVA_BUILD=OFF" in LLAMA_CMAKE_ARGS.split()
