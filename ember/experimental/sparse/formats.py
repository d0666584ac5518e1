"""The sparse formats by name, as empty() and eye() take them (sparse_format=)."""
from ember.experimental.sparse.bcoo import BCOO

FORMATS: dict[str, type] = {"bcoo": BCOO}
