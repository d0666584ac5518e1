"""ember.experimental.sparse (jax.experimental.sparse): sparse arrays and the transformation that runs dense code
on them (docs/sparse.md). BCOO (batched COO) is the main format, with its bcoo_* operations; sparsify runs a
function of dense operations on BCOO arguments; grad, value_and_grad, jacfwd, jacrev and jacobian differentiate
with respect to a sparse argument's data; COO, CSR and CSC are 2-D formats, BCSR the batched CSR one."""
from ember.experimental.sparse._base import (CuSparseEfficiencyWarning as CuSparseEfficiencyWarning,
                                             JAXSparse as JAXSparse, SparseEfficiencyError as SparseEfficiencyError,
                                             SparseEfficiencyWarning as SparseEfficiencyWarning)
from ember.experimental.sparse import bcoo as bcoo
from ember.experimental.sparse.bcoo import (
    BCOO as BCOO, bcoo_broadcast_in_dim as bcoo_broadcast_in_dim, bcoo_concatenate as bcoo_concatenate,
    bcoo_conv_general_dilated as bcoo_conv_general_dilated, bcoo_dot_general as bcoo_dot_general,
    bcoo_dot_general_sampled as bcoo_dot_general_sampled, bcoo_dynamic_slice as bcoo_dynamic_slice,
    bcoo_extract as bcoo_extract, bcoo_fromdense as bcoo_fromdense, bcoo_gather as bcoo_gather,
    bcoo_multiply_dense as bcoo_multiply_dense, bcoo_multiply_sparse as bcoo_multiply_sparse,
    bcoo_reduce_sum as bcoo_reduce_sum, bcoo_reshape as bcoo_reshape, bcoo_rev as bcoo_rev,
    bcoo_slice as bcoo_slice, bcoo_sort_indices as bcoo_sort_indices, bcoo_squeeze as bcoo_squeeze,
    bcoo_sum_duplicates as bcoo_sum_duplicates, bcoo_todense as bcoo_todense, bcoo_transpose as bcoo_transpose,
    bcoo_update_layout as bcoo_update_layout, bcoo_dot_general_p as bcoo_dot_general_p,
    bcoo_dot_general_sampled_p as bcoo_dot_general_sampled_p, bcoo_extract_p as bcoo_extract_p,
    bcoo_fromdense_p as bcoo_fromdense_p, bcoo_sort_indices_p as bcoo_sort_indices_p,
    bcoo_spdot_general_p as bcoo_spdot_general_p, bcoo_sum_duplicates_p as bcoo_sum_duplicates_p,
    bcoo_todense_p as bcoo_todense_p, bcoo_transpose_p as bcoo_transpose_p)
from ember.experimental.sparse import api as api
from ember.experimental.sparse.api import empty as empty, eye as eye, todense as todense, todense_p as todense_p
from ember.experimental.sparse import transform as transform
from ember.experimental.sparse.transform import sparsify as sparsify
from ember.experimental.sparse import ad as ad
from ember.experimental.sparse.ad import (grad as grad, jacfwd as jacfwd, jacobian as jacobian, jacrev as jacrev,
                                          value_and_grad as value_and_grad)
from ember.experimental.sparse import random as random
from ember.experimental.sparse.random import random_bcoo as random_bcoo
from ember.experimental.sparse import coo as coo
from ember.experimental.sparse.coo import (COO as COO, coo_fromdense as coo_fromdense, coo_matmat as coo_matmat,
                                           coo_matvec as coo_matvec, coo_todense as coo_todense,
                                           coo_fromdense_p as coo_fromdense_p, coo_matmat_p as coo_matmat_p,
                                           coo_matvec_p as coo_matvec_p, coo_todense_p as coo_todense_p)
from ember.experimental.sparse import csr as csr
from ember.experimental.sparse.csr import (CSC as CSC, CSR as CSR, csr_fromdense as csr_fromdense,
                                           csr_matmat as csr_matmat, csr_matvec as csr_matvec,
                                           csr_todense as csr_todense, csr_fromdense_p as csr_fromdense_p,
                                           csr_matmat_p as csr_matmat_p, csr_matvec_p as csr_matvec_p,
                                           csr_todense_p as csr_todense_p)
from ember.experimental.sparse import bcsr as bcsr
from ember.experimental.sparse.bcsr import (
    BCSR as BCSR, bcsr_broadcast_in_dim as bcsr_broadcast_in_dim, bcsr_concatenate as bcsr_concatenate,
    bcsr_dot_general as bcsr_dot_general, bcsr_extract as bcsr_extract, bcsr_fromdense as bcsr_fromdense,
    bcsr_sum_duplicates as bcsr_sum_duplicates, bcsr_todense as bcsr_todense, bcsr_dot_general_p as bcsr_dot_general_p,
    bcsr_extract_p as bcsr_extract_p, bcsr_fromdense_p as bcsr_fromdense_p, bcsr_todense_p as bcsr_todense_p)
from ember.experimental.sparse import util as util
from ember.experimental.sparse import linalg as linalg
