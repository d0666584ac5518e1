"""optax's schedules: functions of the step count (an int or a traced int32) giving a hyper-parameter's value.
Anywhere a learning rate is taken, a schedule is too."""
from __future__ import annotations

from typing import Any, Sequence

from ember import numpy as enp

Schedule = Any


def constant_schedule(value: Any) -> Schedule:
    return lambda count: value


def polynomial_schedule(init_value: Any, end_value: Any, power: Any, transition_steps: int,
                        transition_begin: int = 0) -> Schedule:
    """From init_value to end_value over transition_steps (after transition_begin) along (1 - t)**power."""
    if transition_steps <= 0:
        return lambda count: init_value
    transition_begin = max(transition_begin, 0)

    def schedule(count: Any) -> Any:
        count = enp.clip(count - transition_begin, 0, transition_steps)
        frac = 1 - count / transition_steps
        return (init_value - end_value) * frac ** power + end_value
    return schedule


def linear_schedule(init_value: Any, end_value: Any, transition_steps: int, transition_begin: int = 0) -> Schedule:
    return polynomial_schedule(init_value, end_value, 1, transition_steps, transition_begin)


def piecewise_constant_schedule(init_value: Any, boundaries_and_scales: dict[int, float] | None = None) -> Schedule:
    """init_value, multiplied by scale at each boundary step passed."""
    if boundaries_and_scales is not None and any(s < 0 for s in boundaries_and_scales.values()):
        raise ValueError("ember.optim.piecewise_constant_schedule: scale factors must be non-negative")

    def schedule(count: Any) -> Any:
        v = init_value
        for threshold, factor in sorted((boundaries_and_scales or {}).items()):
            indicator = enp.maximum(0.0, enp.sign(threshold - count))
            v = v * indicator + (1 - indicator) * factor * v
        return v
    return schedule


def exponential_decay(init_value: Any, transition_steps: int, decay_rate: float, transition_begin: int = 0,
                      staircase: bool = False, end_value: Any = None) -> Schedule:
    """init_value * decay_rate ** ((count - transition_begin) / transition_steps), bounded by end_value."""
    if transition_steps <= 0 or decay_rate == 0:
        return lambda count: init_value
    transition_begin = max(transition_begin, 0)

    def schedule(count: Any) -> Any:
        decreased = count - transition_begin
        p = decreased / transition_steps
        if staircase:
            p = enp.floor(p)
        value = enp.where(decreased <= 0, init_value, init_value * enp.power(decay_rate, p))
        if end_value is not None:
            value = (enp.maximum if decay_rate < 1.0 else enp.minimum)(value, end_value)
        return value
    return schedule


def cosine_decay_schedule(init_value: Any, decay_steps: int, alpha: Any = 0.0, exponent: Any = 1.0) -> Schedule:
    """init_value * ((1 - alpha) * (0.5 (1 + cos(pi t / decay_steps))) ** exponent + alpha), then constant."""
    if not decay_steps > 0:
        raise ValueError(f"ember.optim.cosine_decay_schedule: decay_steps must be positive, got {decay_steps}")

    def schedule(count: Any) -> Any:
        steps = float(decay_steps)
        count = enp.minimum(float(count) if isinstance(count, int) else count, steps)
        cosine = 0.5 * (1 + enp.cos(enp.pi * count / steps))
        return init_value * ((1 - alpha) * cosine ** exponent + alpha)
    return schedule


def join_schedules(schedules: Sequence[Schedule], boundaries: Sequence[int]) -> Schedule:
    """schedules[i] from boundaries[i - 1] on, each counting from its own start."""
    def schedule(step: Any) -> Any:
        output = schedules[0](step)
        for boundary, following in zip(boundaries, schedules[1:]):
            output = enp.where(step < boundary, output, following(step - boundary))
        return output
    return schedule


def warmup_cosine_decay_schedule(init_value: Any, peak_value: Any, warmup_steps: int, decay_steps: int,
                                 end_value: Any = 0.0, exponent: Any = 1.0) -> Schedule:
    """Linear warm-up from init_value to peak_value, then cosine decay to end_value at decay_steps."""
    alpha = 0.0 if peak_value == 0.0 else end_value / peak_value
    return join_schedules([linear_schedule(init_value, peak_value, warmup_steps),
                           cosine_decay_schedule(peak_value, decay_steps - warmup_steps, alpha, exponent)],
                          [warmup_steps])


def warmup_exponential_decay_schedule(init_value: Any, peak_value: Any, warmup_steps: int, transition_steps: int,
                                      decay_rate: Any, transition_begin: int = 0, staircase: bool = False,
                                      end_value: Any = None) -> Schedule:
    return join_schedules([linear_schedule(init_value, peak_value, warmup_steps),
                           exponential_decay(peak_value, transition_steps, decay_rate, transition_begin, staircase,
                                             end_value)], [warmup_steps])


def warmup_constant_schedule(init_value: Any, peak_value: Any, warmup_steps: int) -> Schedule:
    return linear_schedule(init_value, peak_value, warmup_steps)


__all__ = [
    "constant_schedule", "cosine_decay_schedule", "exponential_decay", "join_schedules", "linear_schedule",
    "piecewise_constant_schedule", "polynomial_schedule", "warmup_constant_schedule",
    "warmup_cosine_decay_schedule", "warmup_exponential_decay_schedule",
]
