"""Layer 3, prims: the first-order primitives, each defined with all its rules beside it. Importing this package
registers them all. Modules import one way: checks <- shape <- families <- elementwise <- slicing, reduction, dot
(<- indexing, sorting, conv, windowed, special, bits, fft, effects (tokens, dce_sink) <- lax_helpers, jax.lax's
compositions of primitives <- ragged, the ragged dots <- collectives, over named axes <- linalg, the matrix
factorisations).

The public functions (the strict, jax.lax-like API) are declared once, in each module's `__all__`, and re-exported
here in this order: shape, elementwise, slicing, reduction, dot, indexing, sorting, conv, windowed, special, bits,
fft, effects, lax_helpers, ragged, collectives (ember.lax re-exports them in turn)."""
from ember._core.exports import reexport as _reexport
from ember._prims import shape as _shape, elementwise as _elementwise, slicing as _slicing
from ember._prims import reduction as _reduction, dot as _dot, indexing as _indexing, sorting as _sorting
from ember._prims import conv as _conv, windowed as _windowed, special as _special, bits as _bits
from ember._prims import fft as _fft
from ember._prims import effects as _effects
from ember._prims import lax_helpers as _lax_helpers
from ember._prims import ragged as _ragged
from ember._prims import collectives as _collectives
from ember._prims import linalg as _linalg  # noqa: F401  (registers the factorisations; jax.lax.linalg's names)
from ember._prims import sharding as _sharding  # noqa: F401  (registers sharding_constraint)
from ember._prims import refs as _refs  # noqa: F401  (registers the reference primitives: ember.new_ref, ember.ref)
from ember._prims import ref_views as _ref_views  # noqa: F401  (ref.at, reshape, T, bitcast: views of a Ref)

__all__ = _reexport(globals(), [_shape, _elementwise, _slicing, _reduction, _dot, _indexing, _sorting, _conv,
                                _windowed, _special, _bits, _fft, _effects, _lax_helpers, _ragged, _collectives])
