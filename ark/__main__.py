"""``python -m ark ...`` is the ``ark`` command line (`ark.cli.main`)."""

from ark.cli.main import entry

entry()
