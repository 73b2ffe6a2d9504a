"""``python -m ark.data.demo --root data/stark``: build the demo graph and print its statistics
(`ark.data.demo.writer.main`)."""

from ark.data.demo.writer import main

main()
