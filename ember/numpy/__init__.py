"""ember.numpy: numpy's API on ember arrays, with numpy-style broadcasting and JAX's dtype promotion
(Python scalars are weakly typed: x_f16 * 2.0 stays float16).

The implementation lives in ember._numpy. Each of its modules declares the public names it defines in its
`__all__`; this module re-exports them, in this order: dtypes, promotion, shape, ufuncs, creation, mathfuncs,
reductions, logexp, cumulative, linalg, einsum, selection, sorting, statistics, manipulation, grids, setops, signal,
utilities, ufunc_api (the ufunc type; add, multiply, ... as ufuncs); then the subpackages ember.numpy.linalg and
ember.numpy.fft (the array API's extensions)."""
from ember._core.exports import reexport as _reexport
# importing ember._numpy.methods installs the operators and methods of Array and Tracer
from ember._numpy import methods as _methods  # noqa: F401
from ember._numpy import docstrings as _docstrings
from ember._numpy import (dtypes as _dtypes, promotion as _promotion, shape as _shape, ufuncs as _ufuncs,
                          creation as _creation, mathfuncs as _mathfuncs, reductions as _reductions,
                          logexp as _logexp, cumulative as _cumulative, linalg as _linalg, einsum as _einsum,
                          selection as _selection, sorting as _sorting, statistics as _statistics,
                          manipulation as _manipulation, grids as _grids, setops as _setops, signal as _signal,
                          utilities as _utilities, ufunc_api as _ufunc_api)
from ember._numpy.utilities import __array_namespace_info__ as __array_namespace_info__

# The Python array API standard: the versions whose names and semantics ember.numpy follows (see
# docs/conformance.md for what the conformance suite finds)
__array_api_version__ = "2023.12"
__array_api_supported_versions__ = ("2021.12", "2022.12", "2023.12")

__all__ = _reexport(globals(), [_dtypes, _promotion, _shape, _ufuncs, _creation, _mathfuncs, _reductions, _logexp,
                                _cumulative, _linalg, _einsum, _selection, _sorting, _statistics, _manipulation,
                                _grids, _setops, _signal, _utilities, _ufunc_api])
_docstrings.apply(globals())

from ember.numpy import linalg as linalg  # noqa: E402 (it uses this module's names)
from ember.numpy import fft as fft  # noqa: E402

__all__ += ["linalg", "fft"]
