"""scripts/probe_multi_call.py refuses a bad --student, a missing adapter and a bad --limit in one line naming
the value, before it loads a tokenizer or a model."""

from __future__ import annotations

import runpy
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _script() -> SimpleNamespace:
    return SimpleNamespace(**runpy.run_path(str(ROOT / "scripts" / "probe_multi_call.py")))


@pytest.mark.parametrize("argv, named", [
    (["--student", "results/distill/demo-smollm2-480/adapter.gguf"], "NAME=ADAPTER.gguf"),
    (["--student", "s=results/distill/nowhere/adapter.gguf"], "no adapter file 'results/distill/nowhere/adapter.gguf'"),
    (["--limit", "0"], "--limit and --threads take a whole number from 1, got 0"),
])
def test_bad_arguments_are_one_line_before_any_work(argv, named, monkeypatch):
    import ark.distill.student

    def loaded(*_):
        raise AssertionError("the tokenizer was loaded before the arguments were checked")

    monkeypatch.setattr(ark.distill.student, "load_tokenizer", loaded)
    mod = _script()
    with pytest.raises(SystemExit) as err:
        mod.main(argv)
    message = str(err.value)
    assert named in message and "\n" not in message


def test_the_shipped_student_and_no_adapter_parse():
    mod = _script()   # puts scripts/ on the path, as the script does for itself
    from compare_students import shipped_student

    name, path = mod.parse_student("=".join(map(str, shipped_student())))
    assert name == "demo-smollm2-480" and path.is_file()
    assert mod.parse_student("base=") == ("base", None)
