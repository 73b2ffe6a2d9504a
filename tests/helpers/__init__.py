"""Helpers the tests share: a toy graph, the scripted OpenAI-compatible server, a local stand-in for the Hugging Face hub, synthetic STaRK files, run-directory fixtures and the golden runs."""
