"""The package version, in a module of its own so that any layer can read it without importing the
package root (whose lazy attributes reach the harness). pyproject.toml holds the same number."""

__version__ = "0.1.0"
