"""ember.monitoring, as jax.monitoring: listen to named events, durations, time spans and scalars that the program or
ember records. ember records JAX's compile-step events where it does the same work (staging a jitted function,
lowering it to StableHLO, compiling it) and the persistent compilation cache's (requests, hits, misses, retrieval
time): their names and arguments are JAX 0.10.2's (ember/_core/monitoring.py lists them; docs/debugging.md)."""
from ember._core.monitoring import (clear_event_listeners as clear_event_listeners, record_event as record_event,
                                    record_event_duration_secs as record_event_duration_secs,
                                    record_event_time_span as record_event_time_span, record_scalar as record_scalar,
                                    register_event_duration_secs_listener as register_event_duration_secs_listener,
                                    register_event_listener as register_event_listener,
                                    register_event_time_span_listener as register_event_time_span_listener,
                                    register_scalar_listener as register_scalar_listener,
                                    unregister_event_duration_listener as unregister_event_duration_listener,
                                    unregister_event_listener as unregister_event_listener,
                                    unregister_event_time_span_listener as unregister_event_time_span_listener,
                                    unregister_scalar_listener as unregister_scalar_listener)

__all__ = ["clear_event_listeners", "record_event", "record_event_duration_secs", "record_event_time_span",
           "record_scalar", "register_event_duration_secs_listener", "register_event_listener",
           "register_event_time_span_listener", "register_scalar_listener", "unregister_event_duration_listener",
           "unregister_event_listener", "unregister_event_time_span_listener", "unregister_scalar_listener"]
