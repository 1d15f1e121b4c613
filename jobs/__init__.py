"""Entry points users run: the CLI and the jobs it starts."""
