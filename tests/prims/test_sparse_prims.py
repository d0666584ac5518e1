"""Oracle tests for the primitives of ember.experimental.sparse (jax.experimental.sparse's): each has a Case below
(tests/test_sparse.py tests the sparse operations themselves)."""
from jax.experimental import sparse as js

from ember.experimental import sparse
from oracle import Case, oracle_tests

FI = ["float32", "float64", "int32"]

CASES = [
    # todense of a dense (traced) array: the identity, which sparsify makes dense where its input is sparse
    Case("todense", lambda x: sparse.todense(x) * 2, lambda x: (x * 2).astype(x.dtype), [((2, 3),), ((4,),)], FI,
         jax=lambda x: js.todense(x) * 2),
]

test_forward, test_grad, test_jvp, test_vmap, test_jacobians = oracle_tests(CASES)
