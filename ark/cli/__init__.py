"""The ``ark`` command (`ark.cli.main`): its verbs in one module per group, the live view of ``ark ask``
(`ark.cli.ask`) and the MCP server of ``ark mcp`` (`ark.cli.mcp`)."""
