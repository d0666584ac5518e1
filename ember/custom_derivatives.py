"""ember.custom_derivatives, as jax.custom_derivatives: functions with custom derivative rules (custom_jvp,
custom_vjp), custom_gradient and closure_convert, and the primitives their calls stage to."""
from ember._api.closures import closure_convert as closure_convert, custom_gradient as custom_gradient
from ember._control import custom_jvp as custom_jvp, custom_vjp as custom_vjp
from ember._control.custom import (CustomVJPPrimal as CustomVJPPrimal, SymbolicZero as SymbolicZero,
                                   custom_jvp_call_p as custom_jvp_call_p, custom_vjp_call_p as custom_vjp_call_p)

__all__ = ["CustomVJPPrimal", "SymbolicZero", "closure_convert", "custom_gradient", "custom_jvp", "custom_jvp_call_p",
           "custom_vjp", "custom_vjp_call_p"]
