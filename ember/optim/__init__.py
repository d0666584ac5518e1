"""ember.optim: optax's API (names, signatures, states and numbers), so optax users switch by changing the
import: `opt = ember.optim.adam(1e-3); state = opt.init(params); updates, state = opt.update(grads, state, params);
params = ember.optim.apply_updates(params, updates)`. States are pytrees, so a whole train step jits. Losses
(`ember.optim.losses` and top-level) and schedules (`ember.optim.schedules` and top-level) as in optax."""
from types import SimpleNamespace as _Namespace

from ember.optim import _losses, _schedules
from ember.optim._alias import adam as adam, adamw as adamw, nadam as nadam, nadamw as nadamw
from ember.optim._alias import rmsprop as rmsprop, sgd as sgd
from ember.optim._base import (EmptyState as EmptyState, GradientTransformation as GradientTransformation,
                               GradientTransformationExtraArgs as GradientTransformationExtraArgs,
                               MaskedNode as MaskedNode, MaskedState as MaskedState, Schedule as Schedule,
                               apply_updates as apply_updates, chain as chain, global_norm as global_norm,
                               identity as identity, masked as masked, named_chain as named_chain,
                               safe_increment as safe_increment, set_to_zero as set_to_zero, stateless as stateless)
from ember.optim._losses import (
    cosine_distance as cosine_distance, cosine_similarity as cosine_similarity, hinge_loss as hinge_loss,
    huber_loss as huber_loss, l2_loss as l2_loss, log_cosh as log_cosh,
    sigmoid_binary_cross_entropy as sigmoid_binary_cross_entropy, softmax_cross_entropy as softmax_cross_entropy,
    softmax_cross_entropy_with_integer_labels as softmax_cross_entropy_with_integer_labels,
    squared_error as squared_error,
)
from ember.optim._schedules import (
    constant_schedule as constant_schedule, cosine_decay_schedule as cosine_decay_schedule,
    exponential_decay as exponential_decay, join_schedules as join_schedules, linear_schedule as linear_schedule,
    piecewise_constant_schedule as piecewise_constant_schedule, polynomial_schedule as polynomial_schedule,
    warmup_constant_schedule as warmup_constant_schedule, warmup_cosine_decay_schedule as warmup_cosine_decay_schedule,
    warmup_exponential_decay_schedule as warmup_exponential_decay_schedule,
)
from ember.optim._transforms import (
    EmaState as EmaState, ScaleByAdamState as ScaleByAdamState, ScaleByRmsState as ScaleByRmsState,
    ScaleByRStdDevState as ScaleByRStdDevState, ScaleByScheduleState as ScaleByScheduleState, TraceState as TraceState,
    add_decayed_weights as add_decayed_weights, clip as clip, clip_by_global_norm as clip_by_global_norm, ema as ema,
    keep_params_nonnegative as keep_params_nonnegative, scale as scale, scale_by_adam as scale_by_adam,
    scale_by_learning_rate as scale_by_learning_rate, scale_by_rms as scale_by_rms,
    scale_by_schedule as scale_by_schedule, scale_by_sign as scale_by_sign, scale_by_stddev as scale_by_stddev,
    trace as trace,
)
from ember.optim._wrappers import (
    ApplyIfFiniteState as ApplyIfFiniteState, InjectStatefulHyperparamsState as InjectStatefulHyperparamsState,
    LookaheadParams as LookaheadParams, LookaheadState as LookaheadState, MultiSteps as MultiSteps,
    MultiStepsState as MultiStepsState, WrappedSchedule as WrappedSchedule,
    WrappedScheduleState as WrappedScheduleState, ZeroNansState as ZeroNansState, apply_if_finite as apply_if_finite,
    flatten as flatten, inject_hyperparams as inject_hyperparams, lookahead as lookahead,
    skip_large_updates as skip_large_updates, skip_not_finite as skip_not_finite, zero_nans as zero_nans,
)

losses = _Namespace(**{name: getattr(_losses, name) for name in _losses.__all__})
schedules = _Namespace(**{name: getattr(_schedules, name) for name in _schedules.__all__})
tree = _Namespace(norm=global_norm)
