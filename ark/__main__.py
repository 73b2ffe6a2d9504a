"""``python -m ark ...`` is the ``ark`` command line (`ark.cli`)."""

from ark.cli import entry

entry()
