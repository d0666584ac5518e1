"""The sparse formats by name, as empty() and eye() take them (sparse_format=)."""
from ember.experimental.sparse.bcoo import BCOO
from ember.experimental.sparse.bcsr import BCSR
from ember.experimental.sparse.coo import COO
from ember.experimental.sparse.csr import CSC, CSR

FORMATS: dict[str, type] = {"bcoo": BCOO, "bcsr": BCSR, "coo": COO, "csr": CSR, "csc": CSC}
