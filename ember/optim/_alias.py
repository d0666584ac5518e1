"""optax's optimizers as chains of transformations (the same chains, so the same numbers)."""
from __future__ import annotations

from typing import Any

from ember.optim._base import GradientTransformation, chain, identity
from ember.optim._transforms import (add_decayed_weights, scale_by_adam, scale_by_learning_rate, scale_by_rms,
                                     scale_by_stddev, trace)


def sgd(learning_rate: Any, momentum: Any = None, nesterov: bool = False, accumulator_dtype: Any = None
        ) -> GradientTransformation:
    """Stochastic gradient descent, with momentum (and Nesterov's variant) when momentum is given."""
    first = trace(momentum, nesterov, accumulator_dtype) if momentum is not None else identity()
    return chain(first, scale_by_learning_rate(learning_rate))


def adam(learning_rate: Any, b1: Any = 0.9, b2: Any = 0.999, eps: Any = 1e-8, eps_root: Any = 0.0,
         mu_dtype: Any = None, *, nesterov: bool = False) -> GradientTransformation:
    """Adam (Kingma and Ba, 2014)."""
    return chain(scale_by_adam(b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov),
                 scale_by_learning_rate(learning_rate))


def nadam(learning_rate: Any, b1: Any = 0.9, b2: Any = 0.999, eps: Any = 1e-8, eps_root: Any = 0.0,
          mu_dtype: Any = None) -> GradientTransformation:
    """Adam with Nesterov's momentum."""
    return adam(learning_rate, b1, b2, eps, eps_root, mu_dtype, nesterov=True)


def adamw(learning_rate: Any, b1: Any = 0.9, b2: Any = 0.999, eps: Any = 1e-8, eps_root: Any = 0.0,
          mu_dtype: Any = None, weight_decay: Any = 1e-4, mask: Any = None, *, nesterov: bool = False
          ) -> GradientTransformation:
    """Adam with decoupled weight decay (multiplied by the learning rate, as optax and PyTorch do)."""
    return chain(scale_by_adam(b1, b2, eps, eps_root, mu_dtype, nesterov=nesterov),
                 add_decayed_weights(weight_decay, mask), scale_by_learning_rate(learning_rate))


def nadamw(learning_rate: Any, b1: Any = 0.9, b2: Any = 0.999, eps: Any = 1e-8, eps_root: Any = 0.0,
           mu_dtype: Any = None, weight_decay: Any = 1e-4, mask: Any = None) -> GradientTransformation:
    return adamw(learning_rate, b1, b2, eps, eps_root, mu_dtype, weight_decay, mask, nesterov=True)


def rmsprop(learning_rate: Any, decay: Any = 0.9, eps: Any = 1e-8, initial_scale: Any = 0.0,
            eps_in_sqrt: bool = True, centered: bool = False, momentum: Any = None, nesterov: bool = False,
            bias_correction: bool = False) -> GradientTransformation:
    """RMSProp (centered: divide by the standard deviation instead of the root mean square)."""
    if centered:
        if bias_correction:
            raise NotImplementedError("ember.optim.rmsprop: centered=True with bias_correction=True is not "
                                      "supported yet")
        first = scale_by_stddev(decay, eps, initial_scale, eps_in_sqrt)
    else:
        first = scale_by_rms(decay, eps, initial_scale, eps_in_sqrt, bias_correction)
    return chain(first, scale_by_learning_rate(learning_rate),
                 trace(momentum, nesterov) if momentum is not None else identity())


__all__ = ["adam", "adamw", "nadam", "nadamw", "rmsprop", "sgd"]
