"""The `nexus` command line (Typer)."""
