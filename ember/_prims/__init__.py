"""ember's primitives, each defined with its rules beside it. Importing this package registers them all."""
from ember._prims import elementwise, structural  # noqa: F401
