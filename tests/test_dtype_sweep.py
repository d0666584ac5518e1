"""Every public function of ember.numpy, ember.lax, ember.random, ember.nn and ember.nn.initializers that takes a
dtype-like parameter (dtype, preferred_element_type, index_dtype, new_dtype, ...) gives, with 64-bit mode off, the
dtype JAX 0.10.2 gives for the same call with a 64-bit dtype asked for (float64, int64, uint64, complex128 where the
function takes them), and warns where JAX warns. CALLS holds one call per such function; a function that gains a
dtype-like parameter without an entry here fails test_every_dtype_parameter_is_swept, so no new one can leak."""
import inspect
import types
import warnings

import jax
import jax.nn.initializers
import jax.numpy as jnp
import numpy as np
import pytest

import ember
import ember.nn.initializers
import ember.numpy as enp
from ember._core.dtypes import NarrowedDtypeWarning

DTYPE_PARAMS = ("dtype", "preferred_element_type", "index_dtype", "new_dtype", "out_dtype", "param_dtype",
                "accumulation_type", "result_type")
MODULES = {"numpy": (enp, jnp), "lax": (ember.lax, jax.lax), "random": (ember.random, jax.random),
           "nn": (ember.nn, jax.nn), "nn.initializers": (ember.nn.initializers, jax.nn.initializers)}
WIDE = {"f": np.float64, "i": np.int64, "u": np.uint64, "c": np.complex128}


def _lib(which):
    """The namespace a call is written against: ember's modules (which == 0) or JAX's (which == 1)."""
    mods = {k: v[which] for k, v in MODULES.items()}
    random = mods["random"]
    return types.SimpleNamespace(np=mods["numpy"], lax=mods["lax"], random=random, nn=mods["nn"],
                                 init=mods["nn.initializers"], key=random.key(0))


def _x(L, shape=(2, 3)):
    return L.np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) / 4 + 1


def _init(name, *args):
    return lambda L, d: getattr(L.init, name)(*args)(L.key, (3, 3), d)


def _ctor(name, *args):  # an initializer whose constructor takes the dtype
    return lambda L, d: getattr(L.init, name)(*args, dtype=d)(L.key, (3, 3))


def _sampler(name, *args, **kwargs):
    return lambda L, d: getattr(L.random, name)(L.key, *args, dtype=d, **kwargs)


_F, _I, _FC, _FIU, _FIUC, _IU = "f", "i", "fc", "fiu", "fiuc", "iu"
# name -> (the dtype kinds the call takes, call(L, dtype)), L the namespace of _lib.
CALLS = {
    "numpy.arange": (_FIU, lambda L, d: L.np.arange(5, dtype=d)),
    "numpy.array": (_FIUC, lambda L, d: L.np.array([1, 2, 3], dtype=d)),
    "numpy.asarray": (_FIUC, lambda L, d: L.np.asarray([1, 2, 3], dtype=d)),
    "numpy.astype": (_FIUC, lambda L, d: L.np.astype(_x(L), d)),
    "numpy.convolve": (_F, lambda L, d: L.np.convolve(_x(L, (4,)), _x(L, (3,)), preferred_element_type=d)),
    "numpy.correlate": (_F, lambda L, d: L.np.correlate(_x(L, (4,)), _x(L, (3,)), preferred_element_type=d)),
    "numpy.corrcoef": (_F, lambda L, d: L.np.corrcoef(_x(L), dtype=d)),
    "numpy.cov": (_F, lambda L, d: L.np.cov(_x(L), dtype=d)),
    "numpy.cumprod": (_FIU, lambda L, d: L.np.cumprod(_x(L), dtype=d)),
    "numpy.cumsum": (_FIU, lambda L, d: L.np.cumsum(_x(L), dtype=d)),
    "numpy.cumulative_prod": (_FIU, lambda L, d: L.np.cumulative_prod(_x(L), axis=1, dtype=d)),
    "numpy.cumulative_sum": (_FIU, lambda L, d: L.np.cumulative_sum(_x(L), axis=1, dtype=d)),
    "numpy.dot": (_F, lambda L, d: L.np.dot(_x(L), _x(L).T, preferred_element_type=d)),
    "numpy.einsum": (_F, lambda L, d: L.np.einsum("ij,kj->ik", _x(L), _x(L), preferred_element_type=d)),
    "numpy.empty": (_FIUC, lambda L, d: L.np.empty((2,), dtype=d)),
    "numpy.empty_like": (_FIUC, lambda L, d: L.np.empty_like(_x(L), dtype=d)),
    "numpy.eye": (_FIUC, lambda L, d: L.np.eye(3, dtype=d)),
    "numpy.finfo": (_FC, lambda L, d: L.np.finfo(d)),
    "numpy.frombuffer": (_FIU, lambda L, d: L.np.frombuffer(np.arange(4, dtype=d).tobytes(), dtype=d)),
    "numpy.fromfunction": (_FIU, lambda L, d: L.np.fromfunction(lambda i, j: i + j, (2, 3), dtype=d)),
    "numpy.fromstring": (_FIU, lambda L, d: L.np.fromstring("1 2 3", dtype=d, sep=" ")),
    "numpy.full": (_FIUC, lambda L, d: L.np.full((2,), 3, dtype=d)),
    "numpy.full_like": (_FIUC, lambda L, d: L.np.full_like(_x(L), 3, dtype=d)),
    "numpy.geomspace": (_FC, lambda L, d: L.np.geomspace(1, 8, 4, dtype=d)),
    "numpy.identity": (_FIUC, lambda L, d: L.np.identity(3, dtype=d)),
    "numpy.iinfo": (_IU, lambda L, d: L.np.iinfo(d)),
    "numpy.indices": (_IU, lambda L, d: L.np.indices((2, 3), dtype=d)),
    "numpy.inner": (_F, lambda L, d: L.np.inner(_x(L), _x(L), preferred_element_type=d)),
    "numpy.isdtype": (_FIUC, lambda L, d: L.np.isdtype(d, "numeric")),
    "numpy.linspace": (_FC, lambda L, d: L.np.linspace(0, 1, 5, dtype=d)),
    "numpy.logspace": (_FC, lambda L, d: L.np.logspace(0, 1, 5, dtype=d)),
    "numpy.matmul": (_F, lambda L, d: L.np.matmul(_x(L), _x(L).T, preferred_element_type=d)),
    "numpy.mean": (_FC, lambda L, d: L.np.mean(_x(L), dtype=d)),
    "numpy.nancumprod": (_FIU, lambda L, d: L.np.nancumprod(_x(L), dtype=d)),
    "numpy.nancumsum": (_FIU, lambda L, d: L.np.nancumsum(_x(L), dtype=d)),
    "numpy.nanmean": (_FC, lambda L, d: L.np.nanmean(_x(L), dtype=d)),
    "numpy.nanprod": (_FIU, lambda L, d: L.np.nanprod(_x(L), dtype=d)),
    "numpy.nanstd": (_F, lambda L, d: L.np.nanstd(_x(L), dtype=d)),
    "numpy.nansum": (_FIU, lambda L, d: L.np.nansum(_x(L), dtype=d)),
    "numpy.nanvar": (_F, lambda L, d: L.np.nanvar(_x(L), dtype=d)),
    "numpy.ones": (_FIUC, lambda L, d: L.np.ones((2,), dtype=d)),
    "numpy.ones_like": (_FIUC, lambda L, d: L.np.ones_like(_x(L), dtype=d)),
    "numpy.prod": (_FIU, lambda L, d: L.np.prod(_x(L), dtype=d)),
    "numpy.std": (_F, lambda L, d: L.np.std(_x(L), dtype=d)),
    "numpy.sum": (_FIUC, lambda L, d: L.np.sum(_x(L), dtype=d)),
    "numpy.tensordot": (_F, lambda L, d: L.np.tensordot(_x(L), _x(L).T, 1, preferred_element_type=d)),
    "numpy.trace": (_FIU, lambda L, d: L.np.trace(_x(L, (3, 3)), dtype=d)),
    "numpy.tri": (_FIUC, lambda L, d: L.np.tri(3, dtype=d)),
    "numpy.var": (_F, lambda L, d: L.np.var(_x(L), dtype=d)),
    "numpy.vdot": (_F, lambda L, d: L.np.vdot(_x(L), _x(L), preferred_element_type=d)),
    "numpy.vecdot": (_F, lambda L, d: L.np.vecdot(_x(L), _x(L), preferred_element_type=d)),
    "numpy.zeros": (_FIUC, lambda L, d: L.np.zeros((2,), dtype=d)),
    "numpy.zeros_like": (_FIUC, lambda L, d: L.np.zeros_like(_x(L), dtype=d)),
    "lax.argmax": (_IU, lambda L, d: L.lax.argmax(_x(L), 1, d)),
    "lax.argmin": (_IU, lambda L, d: L.lax.argmin(_x(L), 1, d)),
    "lax.bitcast_convert_type": ("iu", lambda L, d: L.lax.bitcast_convert_type(_x(L, (2,)), d)),
    "lax.broadcasted_iota": (_FIU, lambda L, d: L.lax.broadcasted_iota(d, (2, 3), 1)),
    "lax.conv": (_F, lambda L, d: L.lax.conv(_x(L, (1, 1, 3, 3)), _x(L, (1, 1, 2, 2)), (1, 1), "VALID",
                                             preferred_element_type=d)),
    "lax.conv_general_dilated": (_F, lambda L, d: L.lax.conv_general_dilated(
        _x(L, (1, 1, 3, 3)), _x(L, (1, 1, 2, 2)), (1, 1), "VALID", preferred_element_type=d)),
    "lax.conv_general_dilated_patches": (_F, lambda L, d: L.lax.conv_general_dilated_patches(
        _x(L, (1, 1, 3, 3)), (2, 2), (1, 1), "VALID", preferred_element_type=d)),
    "lax.conv_transpose": (_F, lambda L, d: L.lax.conv_transpose(
        _x(L, (1, 3, 3, 1)), _x(L, (2, 2, 1, 1)), (1, 1), "VALID", preferred_element_type=d)),
    "lax.conv_with_general_padding": (_F, lambda L, d: L.lax.conv_with_general_padding(
        _x(L, (1, 1, 3, 3)), _x(L, (1, 1, 2, 2)), (1, 1), ((0, 0), (0, 0)), None, None, preferred_element_type=d)),
    "lax.convert_element_type": (_FIUC, lambda L, d: L.lax.convert_element_type(_x(L), d)),
    "lax.dot": (_F, lambda L, d: L.lax.dot(_x(L), _x(L).T, preferred_element_type=d)),
    "lax.dot_general": (_F, lambda L, d: L.lax.dot_general(_x(L), _x(L), (((1,), (1,)), ((), ())),
                                                           preferred_element_type=d)),
    "lax.empty": (_FIUC, lambda L, d: L.lax.empty((2,), d)),
    "lax.full": (_FIUC, lambda L, d: L.lax.full((2,), 3, d)),
    "lax.full_like": (_FIUC, lambda L, d: L.lax.full_like(_x(L), 3, d)),
    "lax.iota": (_FIU, lambda L, d: L.lax.iota(d, 4)),
    "random.ball": (_F, _sampler("ball", 3, shape=(2,))),
    "random.beta": (_F, _sampler("beta", 2.0, 3.0, (2,))),
    "random.binomial": (_F, _sampler("binomial", 5.0, 0.5, (2,))),
    "random.bits": (_IU[1], _sampler("bits", (2,))),
    "random.cauchy": (_F, _sampler("cauchy", (2,))),
    "random.chisquare": (_F, _sampler("chisquare", 2.0, (2,))),
    "random.dirichlet": (_F, _sampler("dirichlet", np.ones(3, np.float32), (2,))),
    "random.double_sided_maxwell": (_F, _sampler("double_sided_maxwell", 0.0, 1.0, (2,))),
    "random.exponential": (_F, _sampler("exponential", (2,))),
    "random.f": (_F, _sampler("f", 2.0, 3.0, (2,))),
    "random.gamma": (_F, _sampler("gamma", 2.0, (2,))),
    "random.generalized_normal": (_F, _sampler("generalized_normal", 2.0, (2,))),
    "random.geometric": (_I, _sampler("geometric", 0.5, (2,))),
    "random.gumbel": (_F, _sampler("gumbel", (2,))),
    "random.laplace": (_F, _sampler("laplace", (2,))),
    "random.loggamma": (_F, _sampler("loggamma", 2.0, (2,))),
    "random.logistic": (_F, _sampler("logistic", (2,))),
    "random.lognormal": (_F, _sampler("lognormal", 0.5, (2,))),
    "random.maxwell": (_F, _sampler("maxwell", (2,))),
    "random.multinomial": (_F, _sampler("multinomial", 5.0, np.full(3, 1 / 3, np.float32), shape=(3,))),
    "random.multivariate_normal": (_F, _sampler("multivariate_normal", np.zeros(2, np.float32),
                                                np.eye(2, dtype=np.float32), (3,))),
    "random.normal": (_FC, _sampler("normal", (2,))),
    "random.orthogonal": (_F, _sampler("orthogonal", 3)),
    "random.pareto": (_F, _sampler("pareto", 2.0, (2,))),
    "random.poisson": (_I, _sampler("poisson", 2.0, (2,))),
    "random.rademacher": (_I, _sampler("rademacher", (2,))),
    "random.randint": (_IU, _sampler("randint", (2,), 0, 5)),
    "random.rayleigh": (_F, _sampler("rayleigh", 1.0, (2,))),
    "random.t": (_F, _sampler("t", 3.0, (2,))),
    "random.triangular": (_F, _sampler("triangular", 0.0, 0.5, 1.0, (2,))),
    "random.truncated_normal": (_F, _sampler("truncated_normal", -1.0, 1.0, (2,))),
    "random.uniform": (_F, _sampler("uniform", (2,))),
    "random.wald": (_F, _sampler("wald", 1.0, (2,))),
    "random.weibull_min": (_F, _sampler("weibull_min", 1.0, 2.0, (2,))),
    "nn.one_hot": (_FIU, lambda L, d: L.nn.one_hot(np.arange(3), 3, dtype=d)),
    "nn.initializers.constant": (_FIUC, _ctor("constant", 0.5)),
    "nn.initializers.delta_orthogonal": (_FC, lambda L, d: L.init.delta_orthogonal(dtype=d)(L.key, (3, 3, 3))),
    "nn.initializers.glorot_normal": (_FC, _init("glorot_normal")),
    "nn.initializers.glorot_uniform": (_FC, _init("glorot_uniform")),
    "nn.initializers.he_normal": (_FC, _init("he_normal")),
    "nn.initializers.he_uniform": (_FC, _init("he_uniform")),
    "nn.initializers.kaiming_normal": (_FC, _init("kaiming_normal")),
    "nn.initializers.kaiming_uniform": (_FC, _init("kaiming_uniform")),
    "nn.initializers.lecun_normal": (_FC, _init("lecun_normal")),
    "nn.initializers.lecun_uniform": (_FC, _init("lecun_uniform")),
    "nn.initializers.normal": (_FC, _init("normal")),
    "nn.initializers.ones": (_FIUC, lambda L, d: L.init.ones(L.key, (3,), d)),
    "nn.initializers.orthogonal": (_FC, _init("orthogonal")),
    "nn.initializers.truncated_normal": (_F, _init("truncated_normal")),
    "nn.initializers.uniform": (_F, _init("uniform")),
    "nn.initializers.variance_scaling": (_FC, _init("variance_scaling", 1.0, "fan_in", "normal")),
    "nn.initializers.xavier_normal": (_FC, _init("xavier_normal")),
    "nn.initializers.xavier_uniform": (_FC, _init("xavier_uniform")),
    "nn.initializers.zeros": (_FIUC, lambda L, d: L.init.zeros(L.key, (3,), d)),
}
# Functions whose dtype-like parameter is not a dtype to narrow: what they take is a key type (random.key,
# random.wrap_key_data: a PRNG implementation's key dtype, as JAX's), or a file's element type read back as stored.
NOT_NARROWED = {"random.key": "its dtype is a key dtype (JAX's `dtype=` of random.key), not a numeric one",
                "random.wrap_key_data": "its dtype is a key dtype, not a numeric one",
                "numpy.fromfile": "reads a file (tests/test_numpy_exports.py; the same narrowing as frombuffer)",
                "numpy.fromiter": "JAX 0.10.2 refuses it (NotImplementedError); ember's narrows as frombuffer, "
                                  "test_fromiter_narrows_as_frombuffer",
                "lax.ragged_dot": "JAX 0.10.2 keeps preferred_element_type=float64 with x64 off (a float64 result "
                                  "in 32-bit mode); ember narrows it, with the warning, as its other dots",
                "lax.ragged_dot_general": "as lax.ragged_dot",
                "lax.rng_bit_generator": "its dtype is the bits' unsigned type (JAX refuses the others), compared "
                                         "with JAX in tests/test_lax_rng.py",
                "lax.scaled_dot": "its preferred_element_type is compared with JAX in tests/test_scaled_matmul.py",
                "nn.scaled_dot_general": "its dtypes are compared with JAX in tests/test_scaled_matmul.py",
                "nn.scaled_matmul": "its dtypes are compared with JAX in tests/test_scaled_matmul.py"}


def _public_dtype_functions():
    found = {}
    for prefix, (module, _) in MODULES.items():
        for name in sorted(dir(module)):
            fn = getattr(module, name)
            if name.startswith("_") or not callable(fn) or inspect.isclass(fn):
                continue
            try:
                params = inspect.signature(fn).parameters
            except (TypeError, ValueError):
                continue
            if any(p in DTYPE_PARAMS for p in params):
                found[f"{prefix}.{name}"] = fn
    return found


def test_every_dtype_parameter_is_swept():
    """A public function with a dtype-like parameter is swept below or says why not (NOT_NARROWED)."""
    found = set(_public_dtype_functions())
    missing = sorted(found - set(CALLS) - set(NOT_NARROWED))
    assert not missing, f"add a call to CALLS for {missing}"
    assert not sorted(set(CALLS) - found), "CALLS names functions without a dtype parameter"


def _dtypes(value):
    if isinstance(value, (np.finfo, np.iinfo, jnp.finfo, jnp.iinfo)) or hasattr(value, "bits"):
        return [np.dtype(value.dtype)]
    if isinstance(value, (bool, np.bool_)):
        return [bool]
    return [np.dtype(leaf.dtype) for leaf in jax.tree.leaves(value)]


def _calls():
    for name, (kinds, _) in CALLS.items():
        for kind in kinds:
            yield pytest.param(name, WIDE[kind], id=f"{name}-{np.dtype(WIDE[kind]).name}")


# Calls whose results are not arrays (dtype descriptions), run as they are; every other call is traced alone
# (eval_shape: the dtypes and the warnings, without compiling a program in either library).
NOT_ARRAYS = {"numpy.finfo", "numpy.iinfo", "numpy.isdtype"}


@pytest.mark.parametrize("name,dtype", list(_calls()))
def test_a_64_bit_dtype_gives_jax_dtype_and_warning(name, dtype):
    call = CALLS[name][1]
    with ember.config.override(enable_x64=False), jax.enable_x64(False):
        results = []
        for which, lib in ((1, jax), (0, ember)):
            namespace = _lib(which)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                if name in NOT_ARRAYS:
                    results.append((call(namespace, dtype), caught))
                else:
                    results.append((lib.eval_shape(lambda: call(namespace, dtype)), caught))
        (theirs, theirs_caught), (ours, ours_caught) = results
    assert _dtypes(ours) == _dtypes(theirs), (name, _dtypes(ours), _dtypes(theirs))
    theirs_warned = any("not available" in str(w.message) for w in theirs_caught)
    ours_warned = any(issubclass(w.category, NarrowedDtypeWarning) for w in ours_caught)
    assert ours_warned == theirs_warned, (name, [str(w.message) for w in ours_caught],
                                          [str(w.message) for w in theirs_caught])


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.uint64])
def test_fromiter_narrows_as_frombuffer(dtype):
    """JAX has no fromiter to compare with: ember's gives JAX's frombuffer's dtype, silently as it."""
    with ember.config.override(enable_x64=False), jax.enable_x64(False), warnings.catch_warnings():
        warnings.simplefilter("error")
        ours = enp.fromiter(iter([1, 2, 3]), dtype=dtype)
        theirs = jnp.frombuffer(np.arange(3, dtype=dtype).tobytes(), dtype=dtype)
    assert ours.dtype == theirs.dtype
    np.testing.assert_array_equal(np.asarray(ours), [1, 2, 3])
