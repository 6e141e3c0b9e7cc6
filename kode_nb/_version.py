"""kode_nb's version (the same as pyproject.toml's), for code that reports it (MCP handshakes)."""

__all__ = ["__version__"]

__version__ = "0.1.0"
