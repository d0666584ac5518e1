"""ember.random: JAX's counter-based PRNG (Threefry-2x32 by default; threefry4x32, philox2x32, philox4x32, rbg and
unsafe_rbg on request), giving jax.random's numbers bit for bit.

Keys are explicit values: create one with key(seed) (typed) or PRNGKey(seed) (raw uint32[2]), derive new ones with
split and fold_in, and pass one to each sampler. Every sampler works eagerly, under jit, under vmap (a batch of
keys gives each key's own draws) and inside control flow; gamma, beta, dirichlet, normal and friends are
differentiable in their parameters where JAX's are. See docs/random.md."""
from ember.random._keys import (KEY_DTYPE as KEY_DTYPE, KeyArray as KeyArray, PRNGKey as PRNGKey, bits as bits,
                                clone as clone, fold_in as fold_in, key as key, key_data as key_data,
                                key_impl as key_impl, split as split, wrap_key_data as wrap_key_data)
from ember.random._keys import key_dtype_of as _key_dtype_of, resolve_impl as _resolve_impl
from ember.random._samplers import (
    ball as ball, bernoulli as bernoulli, beta as beta, binomial as binomial, categorical as categorical,
    cauchy as cauchy, chisquare as chisquare, choice as choice, dirichlet as dirichlet,
    double_sided_maxwell as double_sided_maxwell, exponential as exponential, f as f, gamma as gamma,
    generalized_normal as generalized_normal, geometric as geometric, gumbel as gumbel, laplace as laplace,
    loggamma as loggamma, logistic as logistic, lognormal as lognormal, maxwell as maxwell,
    multinomial as multinomial, multivariate_normal as multivariate_normal, normal as normal,
    orthogonal as orthogonal, pareto as pareto, permutation as permutation, poisson as poisson,
    rademacher as rademacher, randint as randint, random_gamma_p as random_gamma_p, rayleigh as rayleigh, t as t,
    triangular as triangular,
    truncated_normal as truncated_normal, uniform as uniform, wald as wald, weibull_min as weibull_min,
)


def key_dtype(impl: object = None) -> object:
    """The dtype of typed keys of impl (default: jax_default_prng_impl's; key<fry> for threefry2x32)."""
    return _key_dtype_of(_resolve_impl("key_dtype", impl))


__all__ = [
    "KeyArray", "PRNGKey", "ball", "bernoulli", "beta", "binomial", "bits", "categorical", "cauchy", "chisquare",
    "choice", "clone", "dirichlet", "double_sided_maxwell", "exponential", "f", "fold_in", "gamma",
    "generalized_normal", "geometric", "gumbel", "key", "key_data", "key_dtype", "key_impl", "laplace", "loggamma",
    "logistic", "lognormal", "maxwell", "multinomial", "multivariate_normal", "normal", "orthogonal", "pareto",
    "permutation", "poisson", "rademacher", "randint", "random_gamma_p", "rayleigh", "split", "t", "triangular",
    "truncated_normal",
    "uniform", "wald", "weibull_min", "wrap_key_data",
]
