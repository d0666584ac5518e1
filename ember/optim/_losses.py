"""optax's loss functions (elementwise or per example: reduce them yourself, as with optax)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ember import numpy as enp
from ember._core import dtypes as dt
from ember.nn._functions import log_sigmoid, log_softmax, logsumexp


def _floating(name: str, arg: str, x: Any) -> Any:
    x = enp.asarray(x)
    if not dt.is_float(x.dtype):
        raise TypeError(f"ember.optim.{name}: {arg} must be a float array, got {x.dtype.name}{list(x.shape)}")
    return x


def softmax_cross_entropy(logits: Any, labels: Any, axis: Any = -1, where: Any = None) -> Any:
    """-sum(labels * log_softmax(logits)) along axis; labels are probabilities."""
    logits = _floating("softmax_cross_entropy", "logits", logits)
    if where is not None:
        where = enp.asarray(where)
        if where.ndim != logits.ndim:
            where = enp.expand_dims(where, axis)
    log_probs = log_softmax(logits, axis, where)
    product = labels * log_probs
    if where is not None:
        product = enp.where(where, product, 0)
    return -enp.sum(product, axis=axis)


def softmax_cross_entropy_with_integer_labels(logits: Any, labels: Any, axis: int = -1, where: Any = None) -> Any:
    """logsumexp(logits) - logits[label] along axis; labels are class indices."""
    logits = _floating("softmax_cross_entropy_with_integer_labels", "logits", logits)
    labels = enp.asarray(labels)
    if not dt.is_int(labels.dtype):
        raise TypeError("ember.optim.softmax_cross_entropy_with_integer_labels: labels must be integers, got "
                        f"{labels.dtype.name}{list(labels.shape)}")
    if labels.shape != logits.shape[:axis % logits.ndim] + logits.shape[axis % logits.ndim + 1:]:
        raise ValueError(f"ember.optim.softmax_cross_entropy_with_integer_labels: labels {labels.shape} must have "
                         f"logits' shape {logits.shape} without axis {axis}")
    axis = axis % logits.ndim
    label_logits = enp.take_along_axis(logits, enp.expand_dims(labels, axis), axis=axis)
    label_logits = enp.squeeze(label_logits, axis)
    if where is not None:
        where = enp.asarray(where)
        if where.ndim != logits.ndim:
            where = enp.expand_dims(where, axis)
        out = logsumexp(logits, axis=axis, where=where) - label_logits
        return enp.where(enp.any(where, axis=axis), out, 0.0)
    return logsumexp(logits, axis=axis) - label_logits


def sigmoid_binary_cross_entropy(logits: Any, labels: Any) -> Any:
    """-labels log(sigmoid(logits)) - (1 - labels) log(1 - sigmoid(logits)), elementwise."""
    logits = _floating("sigmoid_binary_cross_entropy", "logits", logits)
    labels = enp.asarray(labels).astype(logits.dtype)
    return -labels * log_sigmoid(logits) - (1.0 - labels) * log_sigmoid(-logits)


def squared_error(predictions: Any, targets: Any = None) -> Any:
    predictions = _floating("squared_error", "predictions", predictions)
    if targets is not None and enp.shape(targets) != predictions.shape:
        raise ValueError(f"ember.optim.squared_error: predictions {predictions.shape} and targets "
                         f"{enp.shape(targets)} must have one shape")
    errors = predictions - targets if targets is not None else predictions
    return errors ** 2


def l2_loss(predictions: Any, targets: Any = None) -> Any:
    """0.5 * squared_error."""
    return 0.5 * squared_error(predictions, targets)


def huber_loss(predictions: Any, targets: Any = None, *, delta: Any = 1.0) -> Any:
    predictions = _floating("huber_loss", "predictions", predictions)
    errors = predictions - targets if targets is not None else predictions
    abs_errors = enp.abs(errors)
    quadratic = enp.minimum(abs_errors, delta)
    return 0.5 * quadratic ** 2 + delta * (abs_errors - quadratic)


def log_cosh(predictions: Any, targets: Any = None) -> Any:
    predictions = _floating("log_cosh", "predictions", predictions)
    errors = predictions - targets if targets is not None else predictions
    return enp.logaddexp(errors, -errors) - np.asarray(np.log(2.0), errors.dtype)


def hinge_loss(predictor_outputs: Any, targets: Any) -> Any:
    return enp.maximum(0, 1 - predictor_outputs * targets)


def cosine_similarity(predictions: Any, targets: Any, *, epsilon: Any = 0.0, axis: Any = -1) -> Any:
    a = _floating("cosine_similarity", "predictions", predictions)
    b = _floating("cosine_similarity", "targets", targets)
    a_norm = enp.sqrt(enp.clip(enp.sum(enp.square(a), axis=axis, keepdims=True), epsilon))
    b_norm = enp.sqrt(enp.clip(enp.sum(enp.square(b), axis=axis, keepdims=True), epsilon))
    return enp.sum((a / a_norm) * (b / b_norm), axis=axis)


def cosine_distance(predictions: Any, targets: Any, *, epsilon: Any = 0.0, axis: Any = -1) -> Any:
    return 1.0 - cosine_similarity(predictions, targets, epsilon=epsilon, axis=axis)


__all__ = [
    "cosine_distance", "cosine_similarity", "hinge_loss", "huber_loss", "l2_loss", "log_cosh",
    "sigmoid_binary_cross_entropy", "softmax_cross_entropy", "softmax_cross_entropy_with_integer_labels",
    "squared_error",
]
