"""ember.scipy.stats: jax.scipy.stats's distributions (a submodule each, with JAX's functions, names and
defaults: logpdf/pdf/cdf/logcdf/sf/logsf/ppf/isf or logpmf/pmf ...), gaussian_kde, and mode, rankdata and sem.

Every function broadcasts its arguments, turns integers into the default float (float32 without enable_x64) and
runs eagerly, under jit and vmap, and under grad with respect to x and the parameters; log-densities are -inf
outside the support."""
from ember.scipy.stats import bernoulli as bernoulli
from ember.scipy.stats import beta as beta
from ember.scipy.stats import betabinom as betabinom
from ember.scipy.stats import binom as binom
from ember.scipy.stats import cauchy as cauchy
from ember.scipy.stats import chi2 as chi2
from ember.scipy.stats import dirichlet as dirichlet
from ember.scipy.stats import expon as expon
from ember.scipy.stats import gamma as gamma
from ember.scipy.stats import gennorm as gennorm
from ember.scipy.stats import geom as geom
from ember.scipy.stats import gumbel_l as gumbel_l
from ember.scipy.stats import gumbel_r as gumbel_r
from ember.scipy.stats import laplace as laplace
from ember.scipy.stats import logistic as logistic
from ember.scipy.stats import multinomial as multinomial
from ember.scipy.stats import multivariate_normal as multivariate_normal
from ember.scipy.stats import nbinom as nbinom
from ember.scipy.stats import norm as norm
from ember.scipy.stats import pareto as pareto
from ember.scipy.stats import poisson as poisson
from ember.scipy.stats import t as t
from ember.scipy.stats import truncnorm as truncnorm
from ember.scipy.stats import uniform as uniform
from ember.scipy.stats import vonmises as vonmises
from ember.scipy.stats import wrapcauchy as wrapcauchy
from ember.scipy.stats._core import mode as mode, rankdata as rankdata, sem as sem
from ember.scipy.stats._kde import gaussian_kde as gaussian_kde

__all__ = ["bernoulli", "beta", "betabinom", "binom", "cauchy", "chi2", "dirichlet", "expon", "gamma", "gaussian_kde",
           "gennorm", "geom", "gumbel_l", "gumbel_r", "laplace", "logistic", "mode", "multinomial",
           "multivariate_normal", "nbinom", "norm", "pareto", "poisson", "rankdata", "sem", "t", "truncnorm",
           "uniform", "vonmises", "wrapcauchy"]
