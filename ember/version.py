"""ember.version, as jax.version: the version of this ember (pyproject.toml's) as a string and a tuple."""
_version = "0.1.0"
__version__ = _version
__version_info__ = tuple(int(part) for part in _version.split("."))

__all__ = ["__version__", "__version_info__"]
