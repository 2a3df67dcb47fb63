"""minewatch: compliance monitor for nonmetallic mines."""

__version__ = "0.1.0"  # the one place; pyproject.toml reads it (tool.setuptools.dynamic)
