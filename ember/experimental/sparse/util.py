"""jax.experimental.sparse.util's names: the efficiency error and warnings, SparseInfo, and the batch-mapping
helpers (defined in ember/experimental/sparse/_base.py)."""
from ember.experimental.sparse._base import (CuSparseEfficiencyWarning as CuSparseEfficiencyWarning,
                                             SparseEfficiencyError as SparseEfficiencyError,
                                             SparseEfficiencyWarning as SparseEfficiencyWarning,
                                             SparseInfo as SparseInfo, broadcasting_vmap as broadcasting_vmap,
                                             nfold_vmap as nfold_vmap)

__all__ = ["CuSparseEfficiencyWarning", "SparseEfficiencyError", "SparseEfficiencyWarning", "SparseInfo",
           "broadcasting_vmap", "nfold_vmap"]
