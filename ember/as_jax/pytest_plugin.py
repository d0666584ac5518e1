"""A pytest plugin that runs a JAX test suite on ember: `python -m pytest -p ember.as_jax.pytest_plugin tests/`.
Loading it installs the `jax` alias (ember.as_jax.install) before pytest imports any test module or conftest;
pytest-xdist's workers load it too (they parse the same `-p`), so `-n 2` works."""
from ember.as_jax import install

install()
