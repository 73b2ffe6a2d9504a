"""The package build's one addition to pyproject.toml: the checkout's ``conf/`` ships inside the package as
``ark/conf/`` (`ark.config.location.conf_dir` looks there first), so an installed ``ark`` (``pip install .``,
a wheel) finds its Hydra configs from any directory. An editable install (``pip install -e .``) reads the
checkout's ``conf/`` itself and copies nothing.

    pip install .                                     # or: pip wheel --no-deps . ; pip install ark-*.whl
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


class BuildWithConf(build_py):
    """build_py, then ``conf/`` copied to ``<build>/ark/conf`` (YAML files only)."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "ark" / "conf"
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(HERE / "conf", target, ignore=lambda d, names: [
            n for n in names if not (Path(d, n).is_dir() or n.endswith(".yaml"))])

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        conf = Path(self.build_lib) / "ark" / "conf"
        return [*super().get_outputs(include_bytecode), *(str(p) for p in sorted(conf.rglob("*.yaml")))]


setup(cmdclass={"build_py": BuildWithConf})
