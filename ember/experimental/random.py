"""ember.experimental.random, as jax.experimental.random: a stateful generator (stateful_rng, StatefulPRNG) in the
style of numpy.random.default_rng, over ember's stateless keys: each draw folds a counter into the base key, and the
counter is a mutable array reference (ember.Ref) that the draw advances, eagerly and inside jit, so repeated draws
differ; the values are JAX's for the same seed (docs/random.md)."""
from __future__ import annotations

import dataclasses
import operator
from typing import Any, Sequence

import numpy as np

from ember import dtypes as _dtypes, numpy as _jnp, random as _random
from ember._core import Tracer as _Tracer, is_tracing as _is_tracing
from ember._core.refs import RefAval as _RefAval
from ember._core.pytree import register_dataclass as _register_dataclass
from ember.ref import Ref as _Ref, addupdate as _addupdate, get as _get, new_ref as _new_ref


def _canonicalize_size(size: int | Sequence[int] | None, *args: Any) -> tuple[int, ...]:
    if size is None:
        return tuple(np.broadcast_shapes(*(np.shape(arg) for arg in args)))
    if isinstance(size, (int, np.integer)):
        return (operator.index(size),)
    return tuple(map(operator.index, size))


@dataclasses.dataclass(frozen=True)
class StatefulPRNG:
    """A stateful random generator (jax.experimental.random.StatefulPRNG): a typed base key and a counter in a
    Ref; every draw uses the key folded with the counter, then advances it. Make one with stateful_rng(seed). It is
    a pytree (its key and counter), so it may be passed into jit or vmap (split(n) makes one to vmap over), though
    not returned from a transformed function (a Ref cannot be)."""
    _base_key: Any
    _counter: Any

    def key(self, shape: int | Sequence[int] = ()) -> Any:
        """A new key (or an array of keys of this shape), independent of every other this generator gives."""
        _check(self)
        if self._base_key.shape:
            raise ValueError("cannot operate on split stateful generator")
        key = _random.fold_in(self._base_key, _get(self._counter))
        _addupdate(self._counter, ..., 1)
        shape_tuple = _canonicalize_size(shape)
        return _random.split(key, shape_tuple) if shape_tuple else key

    def random(self, size: int | Sequence[int] | None = None, dtype: Any = float) -> Any:
        """Uniform values in [0, 1) of the given size (numpy's Generator.random)."""
        return _random.uniform(self.key(), shape=_canonicalize_size(size), dtype=dtype)

    def uniform(self, low: Any = 0, high: Any = 1, size: int | Sequence[int] | None = None, *,
                dtype: Any = float) -> Any:
        """Uniform values in [low, high) (numpy's Generator.uniform)."""
        return _random.uniform(self.key(), _canonicalize_size(size, low, high), minval=low, maxval=high,
                               dtype=dtype)

    def normal(self, loc: Any = 0, scale: Any = 1, size: int | Sequence[int] | None = None, *,
               dtype: Any = float) -> Any:
        """Normal values of mean loc and standard deviation scale (numpy's Generator.normal)."""
        norm = _random.normal(self.key(), _canonicalize_size(size, loc, scale), dtype)
        return (_jnp.asarray(loc) + _jnp.asarray(scale) * norm).astype(dtype)

    def integers(self, low: Any, high: Any = None, size: int | Sequence[int] | None = None, *,
                 dtype: Any = int) -> Any:
        """Integers in [low, high) (in [0, low) with one bound; numpy's Generator.integers)."""
        if high is None:
            low, high = 0, low
        return _random.randint(self.key(), _canonicalize_size(size, low, high), minval=low, maxval=high,
                               dtype=dtype)

    def split(self, num: int | Sequence[int]) -> "StatefulPRNG":
        """One generator holding num independent ones (keys and counters of that shape), to vmap over."""
        return StatefulPRNG(self.key(num), _new_ref(_jnp.zeros(num, dtype=int)))

    def spawn(self, n_children: int) -> list["StatefulPRNG"]:
        """A list of n_children new independent generators."""
        return [self.__class__(key, _new_ref(0)) for key in self.key(n_children)]


def _check(rng: StatefulPRNG) -> None:
    """JAX's checks of a generator's fields (at its first draw: ember builds pytrees of placeholders too, and a
    generator is one)."""
    key, counter = rng._base_key, rng._counter
    if not (hasattr(key, "dtype") and _jnp.issubdtype(key.dtype, _dtypes.prng_key)):
        raise ValueError(f"Expected base_key to be a typed PRNG key; got {key}")
    if not (isinstance(counter, _Ref) or (isinstance(counter, _Tracer) and isinstance(counter.aval, _RefAval))):
        raise ValueError(f"Expected counter to be a scalar integer ref; got {counter}")


_register_dataclass(StatefulPRNG, data_fields=["_base_key", "_counter"], meta_fields=[])


def stateful_rng(seed: Any = None, *, impl: Any = None) -> StatefulPRNG:
    """A stateful random generator seeded with seed (jax.experimental.random.stateful_rng): draws from it
    (uniform, normal, integers, random, key) advance it, eagerly and inside jit. Without a seed, one is drawn from
    numpy's entropy (only outside transformations: inside one a seed is required, JAX's TypeError)."""
    if seed is None:
        if _is_tracing():
            raise TypeError("When used within transformed code, jax.experimental.random.stateful_rng() requires an "
                            "explicit seed to be set.")
        entropy = np.random.SeedSequence().entropy
        seed = np.int64(int(entropy) & np.iinfo(np.int64).max)
    return StatefulPRNG(_random.key(seed, impl=impl), _new_ref(0))


__all__ = ["StatefulPRNG", "stateful_rng"]
