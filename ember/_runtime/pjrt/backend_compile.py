"""The one function every XLA compile of ember goes through (PJRT_Client_Compile, from Client._compiled): JAX's
`jax._src.compiler.backend_compile_and_load`, which is what `python -m ember.as_jax` gives for that JAX module. A
library may wrap it (chex's `restrict_backends` forbids compiling for a platform this way): it is looked up here at
each compile. `backend.platform` names the platform ("cpu", "cuda")."""
from __future__ import annotations

from typing import Any


def backend_compile_and_load(backend: Any, program: bytes, program_format: bytes, options: bytes,
                             partitioned: bool = False) -> int:
    """Compile program (b"mlir" text or bytecode, b"hlo" a serialized HloModuleProto) with these serialized compile
    options on backend (a PJRT client): the loaded executable's handle."""
    return backend._compile_now(program, program_format, options, partitioned)


__all__ = ["backend_compile_and_load"]
