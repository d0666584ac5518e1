"""XLA FFI handlers for the tests of ember.ffi (tests/test_ffi.py, and ffi_call's Case in tests/prims/test_control.py):
C handlers written with ember's header (ember/ffi.h, ember.ffi.include_dir()), compiled with the system's C compiler
into a shared library, and one handler written in Python with ctypes (no compiler needed: the primitive's Case)."""
from __future__ import annotations

import ctypes
import os
import pathlib
import shutil
import subprocess
import threading

import numpy as np

import ember
from ember._runtime import ffi as runtime_ffi

C_SOURCE = r"""
#include "ember/ffi.h"

/* y = x * scale + offset, elementwise, float32 or float64 (attributes scale and offset, any numeric scalar) */
EmberFfi_Error *affine(EmberFfi_CallFrame *frame) {
    if (ember_ffi_answer_metadata(frame)) return NULL;
    EmberFfi_Buffer *x = ember_ffi_arg(frame, 0), *y = ember_ffi_ret(frame, 0);
    if (x == NULL || y == NULL || x->dtype != y->dtype)
        return ember_ffi_error(frame, EMBER_FFI_INVALID_ARGUMENT, "affine: one operand and one result of one dtype");
    double scale = ember_ffi_scalar_as_double(frame, "scale", 1.0);
    double offset = ember_ffi_scalar_as_double(frame, "offset", 0.0);
    int64_t n = ember_ffi_element_count(x);
    if (x->dtype == EMBER_FFI_F32) {
        for (int64_t i = 0; i < n; i++) ((float *)y->data)[i] = (float)(((float *)x->data)[i] * scale + offset);
    } else if (x->dtype == EMBER_FFI_F64) {
        for (int64_t i = 0; i < n; i++) ((double *)y->data)[i] = ((double *)x->data)[i] * scale + offset;
    } else {
        return ember_ffi_error(frame, EMBER_FFI_UNIMPLEMENTED, "affine: float32 or float64 only");
    }
    return NULL;
}

/* z = x + y (float32), y repeated over x when it has fewer elements (a divisor of x's count): the same values
   whatever vmap_method batched the call */
EmberFfi_Error *add_tiled(EmberFfi_CallFrame *frame) {
    if (ember_ffi_answer_metadata(frame)) return NULL;
    EmberFfi_Buffer *x = ember_ffi_arg(frame, 0), *y = ember_ffi_arg(frame, 1), *z = ember_ffi_ret(frame, 0);
    if (z == NULL || y == NULL || x->dtype != EMBER_FFI_F32 || y->dtype != EMBER_FFI_F32)
        return ember_ffi_error(frame, EMBER_FFI_INVALID_ARGUMENT, "add_tiled: two float32 operands");
    int64_t n = ember_ffi_element_count(x), m = ember_ffi_element_count(y);
    if (m == 0 || n % m != 0 || ember_ffi_element_count(z) != n)
        return ember_ffi_error(frame, EMBER_FFI_INVALID_ARGUMENT, "add_tiled: y's size must divide x's");
    for (int64_t i = 0; i < n; i++) ((float *)z->data)[i] = ((float *)x->data)[i] + ((float *)y->data)[i % m];
    return NULL;
}

/* The operand's bytes as laid out in memory, into a result of the same size: shows the layout XLA gave it */
EmberFfi_Error *raw_copy(EmberFfi_CallFrame *frame) {
    if (ember_ffi_answer_metadata(frame)) return NULL;
    EmberFfi_Buffer *x = ember_ffi_arg(frame, 0), *y = ember_ffi_ret(frame, 0);
    if (ember_ffi_element_count(x) != ember_ffi_element_count(y) || x->dtype != y->dtype)
        return ember_ffi_error(frame, EMBER_FFI_INVALID_ARGUMENT, "raw_copy: operand and result must match");
    if (x->dtype != EMBER_FFI_F32)
        return ember_ffi_error(frame, EMBER_FFI_INVALID_ARGUMENT, "raw_copy: float32 only");
    memcpy(y->data, x->data, (size_t)ember_ffi_element_count(x) * sizeof(float));
    return NULL;
}

/* Each attribute, in name order, as two int32s into the result (int32): its type, and its element type (a scalar), its
   element type * 1000 + its size (an array), its length (a string) or its number of entries (a dictionary) */
EmberFfi_Error *describe_attrs(EmberFfi_CallFrame *frame) {
    if (ember_ffi_answer_metadata(frame)) return NULL;
    EmberFfi_Buffer *y = ember_ffi_ret(frame, 0);
    if (y == NULL || y->dtype != EMBER_FFI_S32)
        return ember_ffi_error(frame, EMBER_FFI_INVALID_ARGUMENT, "describe_attrs: one int32 result");
    int32_t *out = (int32_t *)y->data;
    int64_t n = ember_ffi_element_count(y);
    for (int64_t i = 0; i < n; i++) out[i] = -1;
    for (int64_t i = 0; i < frame->attrs.size && 2 * i + 1 < n; i++) {
        void *v = frame->attrs.values[i];
        out[2 * i] = frame->attrs.types[i];
        switch (frame->attrs.types[i]) {
            case EMBER_FFI_ATTR_SCALAR: out[2 * i + 1] = ((EmberFfi_Scalar *)v)->dtype; break;
            case EMBER_FFI_ATTR_ARRAY:
                out[2 * i + 1] = ((EmberFfi_Array *)v)->dtype * 1000 + (int32_t)((EmberFfi_Array *)v)->size; break;
            case EMBER_FFI_ATTR_STRING: out[2 * i + 1] = (int32_t)((EmberFfi_ByteSpan *)v)->len; break;
            case EMBER_FFI_ATTR_DICTIONARY: out[2 * i + 1] = (int32_t)((EmberFfi_Attrs *)v)->size; break;
        }
    }
    return NULL;
}

/* Counts its calls (a side effect): writes the count so far into its int32 result */
static int32_t calls = 0;
int32_t count_calls(void) { return calls; }
EmberFfi_Error *counter(EmberFfi_CallFrame *frame) {
    if (ember_ffi_answer_metadata(frame)) return NULL;
    calls++;
    EmberFfi_Buffer *y = ember_ffi_ret(frame, 0);
    if (y != NULL && y->dtype == EMBER_FFI_S32) *(int32_t *)y->data = calls;
    return NULL;
}

/* x += 1 in place (float32): the result aliases the operand */
EmberFfi_Error *increment_in_place(EmberFfi_CallFrame *frame) {
    if (ember_ffi_answer_metadata(frame)) return NULL;
    EmberFfi_Buffer *x = ember_ffi_arg(frame, 0), *y = ember_ffi_ret(frame, 0);
    if (x == NULL || y == NULL || x->dtype != EMBER_FFI_F32 || ember_ffi_element_count(x) != ember_ffi_element_count(y))
        return ember_ffi_error(frame, EMBER_FFI_INVALID_ARGUMENT, "increment_in_place: float32 of one size");
    float *out = (float *)y->data, *in = (float *)x->data;
    for (int64_t i = 0; i < ember_ffi_element_count(y); i++) out[i] = in[i] + 1.0f;
    return NULL;
}

EmberFfi_Error *always_fails(EmberFfi_CallFrame *frame) {
    if (ember_ffi_answer_metadata(frame)) return NULL;
    return ember_ffi_error(frame, EMBER_FFI_INVALID_ARGUMENT, "always_fails: the handler refused the call");
}

/* Reports FFI API 0.3 (as XLA's headers of jaxlib 0.10.2 do): newer than the CPU plugin's 0.2 */
EmberFfi_Error *built_for_newer_api(EmberFfi_CallFrame *frame) {
    EmberFfi_ExtensionBase *ext = frame->extension_start;
    if (ext != NULL && ext->type == EMBER_FFI_EXTENSION_METADATA) {
        EmberFfi_Metadata *md = ((EmberFfi_MetadataExtension *)ext)->metadata;
        md->api_version.major_version = 0;
        md->api_version.minor_version = 3;
    }
    return NULL;
}

/* Does not answer the metadata query (leaves the version 0.0) */
EmberFfi_Error *silent(EmberFfi_CallFrame *frame) {
    (void)frame;
    return NULL;
}

/* Fails the metadata query itself */
EmberFfi_Error *refuses_metadata(EmberFfi_CallFrame *frame) {
    return ember_ffi_error(frame, EMBER_FFI_FAILED_PRECONDITION, "refuses_metadata: not today");
}
"""

_lock = threading.Lock()


def compiler() -> str | None:
    """The C compiler the tests build handlers with (None: the tests that need one are skipped)."""
    return shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")


def build(directory: pathlib.Path) -> ctypes.CDLL:
    """The C handlers above, compiled with -I ember.ffi.include_dir() (C99, every warning an error) and loaded."""
    source, library = directory / "handlers.c", directory / "libhandlers.so"
    source.write_text(C_SOURCE)
    subprocess.run([compiler(), "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic", "-O1", "-shared", "-fPIC",
                    "-I", ember.ffi.include_dir(), "-o", str(library), str(source)], check=True,
                   capture_output=True, text=True)
    return ctypes.CDLL(str(library))


# ---------------------------------------------------------------------------------------------------------------
# A handler in Python: y = sin(x), of any float dtype (ctypes calls it from XLA's thread, with the GIL)
PYTHON_SIN_TARGET = "test_ffi_python_sin"


def _python_sin(frame_pointer):
    frame = frame_pointer.contents
    if frame.extension_start and frame.extension_start.contents.type == runtime_ffi.EXTENSION_METADATA:
        metadata = ctypes.cast(frame.extension_start, ctypes.POINTER(runtime_ffi.MetadataExtension)).contents
        metadata.metadata.contents.api_version.major_version = 0
        metadata.metadata.contents.api_version.minor_version = 1
        return 0
    x = ctypes.cast(frame.args.args[0], ctypes.POINTER(runtime_ffi.Buffer)).contents
    y = ctypes.cast(frame.rets.args[0], ctypes.POINTER(runtime_ffi.Buffer)).contents
    dtype = runtime_ffi.DTYPES[x.dtype]
    count = int(np.prod([x.dims[i] for i in range(x.rank)], dtype=np.int64))
    if count:
        values = np.frombuffer((ctypes.c_char * (count * dtype.itemsize)).from_address(x.data), dtype=dtype)
        out = np.sin(values).astype(dtype).tobytes()
        ctypes.memmove(y.data, out, len(out))
    return 0


_PYTHON_SIN = runtime_ffi.HANDLER_TYPE(_python_sin)


def register_python_sin() -> str:
    """Register the Python sin handler (once) and return its target name."""
    with _lock:
        ember.ffi.register_ffi_target(PYTHON_SIN_TARGET, ember.ffi.pycapsule(_PYTHON_SIN))
    return PYTHON_SIN_TARGET
