"""ember.errors, as jax.errors: the exceptions a user of ember catches, under JAX's names where JAX has one.

ConcretizationTypeError and its three conversion errors (bool(), int()/an index, np.asarray of a traced value),
UnexpectedTracerError (a tracer used after its staging ended), NonConcreteBooleanIndexError (a boolean mask index
whose values are traced), their bases JAXTypeError and JAXIndexError (a TypeError and an IndexError), JaxprTypeError
(ember's IRTypeError: an IR that does not type-check), JaxRuntimeError (ember's PjrtError: the runtime failed; its
out-of-memory subclass is also a MemoryError), KeyReuseError (a PRNG key consumed twice, with the debug_key_reuse
option on: docs/random.md), InconclusiveDimensionOperation (a comparison of symbolic dimensions that their values
decide: ember.export's shape polymorphism), and ember's own: CompileError, DeletedArrayError."""
from ember._core.ir import IRTypeError as IRTypeError
from ember._core.trace import ConcretizationTypeError as ConcretizationTypeError
from ember._core.dtypes import ShardingTypeError as ShardingTypeError
from ember._core.trace import TracerArrayConversionError as TracerArrayConversionError
from ember._core.trace import TracerBoolConversionError as TracerBoolConversionError
from ember._core.trace import TracerIntegerConversionError as TracerIntegerConversionError
from ember._core.trace import UnexpectedTracerError as UnexpectedTracerError
from ember._core.shape_poly import InconclusiveDimensionOperation as InconclusiveDimensionOperation
from ember._core.trace import (JAXIndexError as JAXIndexError, JAXTypeError as JAXTypeError,
                               KeyReuseError as KeyReuseError,
                               NonConcreteBooleanIndexError as NonConcreteBooleanIndexError)
from ember._runtime import PjrtError as PjrtError
from ember._runtime.compiler import CompileError as CompileError, DeletedArrayError as DeletedArrayError

JaxprTypeError = IRTypeError
JaxRuntimeError = PjrtError

__all__ = ["CompileError", "ConcretizationTypeError", "DeletedArrayError", "IRTypeError", "JaxRuntimeError",
           "ShardingTypeError", "InconclusiveDimensionOperation", "JAXIndexError", "JAXTypeError", "KeyReuseError",
           "NonConcreteBooleanIndexError",
           "JaxprTypeError", "PjrtError", "TracerArrayConversionError", "TracerBoolConversionError",
           "TracerIntegerConversionError", "UnexpectedTracerError"]
