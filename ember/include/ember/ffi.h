/* ember/ffi.h: writing XLA FFI handlers (custom-call targets) that ember.ffi registers and ember.ffi.ffi_call calls.
 *
 * Compile with `-I $(python -c "import ember.ffi; print(ember.ffi.include_dir())")`; plain C99 (C++ too). This is
 * ember's own declaration of the typed XLA FFI C ABI (custom-call api_version 4), written from the XLA FFI C API
 * (xla/ffi/api/c_api.h), with only what a handler needs: its call frame (operand and result buffers, attributes),
 * returning an error, and answering the metadata query XLA makes when a handler is registered. Handlers written
 * against it report XLA FFI API 0.1 (EMBER_FFI_API_MINOR), which every CPU PJRT plugin ember loads accepts.
 *
 * A handler is one function of the call frame: answer the metadata query first, then read the buffers.
 *
 *     #include "ember/ffi.h"
 *
 *     EmberFfi_Error *add_one(EmberFfi_CallFrame *frame) {
 *         if (ember_ffi_answer_metadata(frame)) return NULL;      // registration asks which API it speaks
 *         EmberFfi_Buffer *x = ember_ffi_arg(frame, 0), *y = ember_ffi_ret(frame, 0);
 *         if (x == NULL || y == NULL || x->dtype != EMBER_FFI_F32)
 *             return ember_ffi_error(frame, EMBER_FFI_INVALID_ARGUMENT, "add_one: one float32 operand and result");
 *         float *in = (float *)x->data, *out = (float *)y->data;
 *         for (int64_t i = 0; i < ember_ffi_element_count(x); i++) out[i] = in[i] + 1.0f;
 *         return NULL;
 *     }
 *
 * and from Python:
 *
 *     lib = ctypes.CDLL("./libadd_one.so")
 *     ember.ffi.register_ffi_target("add_one", ember.ffi.pycapsule(lib.add_one), platform="cpu")
 *     ember.ffi.ffi_call("add_one", ember.ShapeDtypeStruct(x.shape, x.dtype))(x)
 *
 * XLA's own C++ headers (jax.ffi.include_dir(): xla/ffi/api/ffi.h) also make handlers ember can register, when they
 * come from an XLA whose FFI API is no newer than the plugin's (ember.ffi.register_ffi_target says which it accepts):
 * jaxlib 0.10.2's report API 0.3, which the CPU plugin (FFI API 0.2) refuses. */
#ifndef EMBER_FFI_H
#define EMBER_FFI_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The XLA FFI API version these declarations speak: what a handler reports when registered. */
#define EMBER_FFI_API_MAJOR 0
#define EMBER_FFI_API_MINOR 1

/* ---- the ABI ------------------------------------------------------------------------------------------------- */
typedef struct EmberFfi_ExtensionBase {
    size_t struct_size;
    int type; /* EMBER_FFI_EXTENSION_METADATA */
    struct EmberFfi_ExtensionBase *next;
} EmberFfi_ExtensionBase;

typedef struct {
    size_t struct_size;
    EmberFfi_ExtensionBase *extension_start;
    int major_version;
    int minor_version;
} EmberFfi_ApiVersion;

typedef struct EmberFfi_Error EmberFfi_Error; /* opaque: made by the runtime, returned by a handler */

typedef struct {
    size_t struct_size;
    EmberFfi_ExtensionBase *extension_start;
    const char *message;
    int errc; /* an EmberFfi_ErrorCode */
} EmberFfi_ErrorCreateArgs;

typedef EmberFfi_Error *EmberFfi_ErrorCreate(EmberFfi_ErrorCreateArgs *args);

/* The head of the runtime's function table (XLA_FFI_Api): its first function makes errors. */
typedef struct {
    size_t struct_size;
    EmberFfi_ExtensionBase *extension_start;
    EmberFfi_ApiVersion api_version;
    const void *internal_api;
    EmberFfi_ErrorCreate *error_create;
} EmberFfi_Api;

/* Element types: XLA's PrimitiveType numbers. */
typedef enum {
    EMBER_FFI_INVALID = 0, EMBER_FFI_PRED = 1, EMBER_FFI_S8 = 2, EMBER_FFI_S16 = 3, EMBER_FFI_S32 = 4,
    EMBER_FFI_S64 = 5, EMBER_FFI_U8 = 6, EMBER_FFI_U16 = 7, EMBER_FFI_U32 = 8, EMBER_FFI_U64 = 9,
    EMBER_FFI_F16 = 10, EMBER_FFI_F32 = 11, EMBER_FFI_F64 = 12, EMBER_FFI_C64 = 15, EMBER_FFI_BF16 = 16,
    EMBER_FFI_TOKEN = 17, EMBER_FFI_C128 = 18
} EmberFfi_DataType;

/* Error codes (absl's status codes). */
typedef enum {
    EMBER_FFI_OK = 0, EMBER_FFI_CANCELLED = 1, EMBER_FFI_UNKNOWN = 2, EMBER_FFI_INVALID_ARGUMENT = 3,
    EMBER_FFI_NOT_FOUND = 5, EMBER_FFI_RESOURCE_EXHAUSTED = 8, EMBER_FFI_FAILED_PRECONDITION = 9,
    EMBER_FFI_OUT_OF_RANGE = 11, EMBER_FFI_UNIMPLEMENTED = 12, EMBER_FFI_INTERNAL = 13
} EmberFfi_ErrorCode;

enum { EMBER_FFI_BUFFER = 1 };                    /* the type of every operand and result */
typedef enum {                                     /* attribute types */
    EMBER_FFI_ATTR_ARRAY = 1, EMBER_FFI_ATTR_DICTIONARY = 2, EMBER_FFI_ATTR_SCALAR = 3, EMBER_FFI_ATTR_STRING = 4
} EmberFfi_AttrType;
enum { EMBER_FFI_STAGE_EXECUTE = 3 };
enum { EMBER_FFI_EXTENSION_METADATA = 1 };

typedef struct {
    size_t struct_size;
    EmberFfi_ExtensionBase *extension_start;
    int dtype;     /* an EmberFfi_DataType */
    void *data;    /* row-major unless the call asked for other layouts */
    int64_t rank;
    int64_t *dims; /* rank of them */
} EmberFfi_Buffer;

typedef struct {  /* the operands (args) or the results (rets) */
    size_t struct_size;
    EmberFfi_ExtensionBase *extension_start;
    int64_t size;
    int *types;    /* EMBER_FFI_BUFFER each */
    void **values; /* EmberFfi_Buffer * each */
} EmberFfi_Values;

typedef struct {  /* a string attribute, and an attribute's name: not NUL-terminated */
    const char *ptr;
    size_t len;
} EmberFfi_ByteSpan;

typedef struct {  /* a scalar attribute: `value` points at one element of `dtype` */
    int dtype;
    void *value;
} EmberFfi_Scalar;

typedef struct {  /* an array attribute: `size` elements of `dtype` at `data` */
    int dtype;
    size_t size;
    void *data;
} EmberFfi_Array;

typedef struct EmberFfi_Attrs {  /* sorted by name; a dictionary attribute is an EmberFfi_Attrs too */
    size_t struct_size;
    EmberFfi_ExtensionBase *extension_start;
    int64_t size;
    int *types;                 /* EmberFfi_AttrType each */
    EmberFfi_ByteSpan **names;
    void **values;              /* EmberFfi_Scalar *, EmberFfi_Array *, EmberFfi_ByteSpan *, EmberFfi_Attrs * */
} EmberFfi_Attrs;

typedef struct {
    size_t struct_size;
    EmberFfi_ExtensionBase *extension_start; /* the metadata extension when registration asks */
    const EmberFfi_Api *api;
    void *ctx;
    int stage;
    EmberFfi_Values args;
    EmberFfi_Values rets;
    EmberFfi_Attrs attrs;
} EmberFfi_CallFrame;

typedef EmberFfi_Error *EmberFfi_Handler(EmberFfi_CallFrame *frame); /* what register_ffi_target takes */

typedef struct {
    size_t struct_size;
    EmberFfi_ApiVersion api_version;
    uint32_t traits;
} EmberFfi_Metadata;

typedef struct {
    EmberFfi_ExtensionBase base;
    EmberFfi_Metadata *metadata;
} EmberFfi_MetadataExtension;

/* ---- helpers ------------------------------------------------------------------------------------------------- */

/* Registration calls a handler once with the metadata extension: say which API it speaks (and no traits). Returns
 * 1 for that call (the handler then returns NULL at once), 0 for an ordinary call. */
static inline int ember_ffi_answer_metadata(EmberFfi_CallFrame *frame) {
    EmberFfi_ExtensionBase *ext = frame->extension_start;
    if (ext == NULL || ext->type != EMBER_FFI_EXTENSION_METADATA) return 0;
    EmberFfi_Metadata *md = ((EmberFfi_MetadataExtension *)ext)->metadata;
    md->api_version.major_version = EMBER_FFI_API_MAJOR;
    md->api_version.minor_version = EMBER_FFI_API_MINOR;
    md->traits = 0;
    return 1;
}

/* An error for the handler to return: the call fails with this message (copied) and code. */
static inline EmberFfi_Error *ember_ffi_error(EmberFfi_CallFrame *frame, int code, const char *message) {
    EmberFfi_ErrorCreateArgs args;
    memset(&args, 0, sizeof args);
    args.struct_size = sizeof args;
    args.message = message;
    args.errc = code;
    return frame->api->error_create(&args);
}

/* Operand i, result i (NULL past the last one). */
static inline EmberFfi_Buffer *ember_ffi_arg(EmberFfi_CallFrame *frame, int64_t i) {
    return i >= 0 && i < frame->args.size ? (EmberFfi_Buffer *)frame->args.values[i] : NULL;
}

static inline EmberFfi_Buffer *ember_ffi_ret(EmberFfi_CallFrame *frame, int64_t i) {
    return i >= 0 && i < frame->rets.size ? (EmberFfi_Buffer *)frame->rets.values[i] : NULL;
}

static inline int64_t ember_ffi_element_count(const EmberFfi_Buffer *buffer) {
    int64_t n = 1;
    for (int64_t i = 0; i < buffer->rank; i++) n *= buffer->dims[i];
    return n;
}

/* The attribute `name` (ffi_call's keyword arguments) and its type, or NULL when the call has none of that name. */
static inline void *ember_ffi_attr(const EmberFfi_Attrs *attrs, const char *name, int *type) {
    size_t len = strlen(name);
    for (int64_t i = 0; i < attrs->size; i++) {
        const EmberFfi_ByteSpan *span = attrs->names[i];
        if (span->len == len && memcmp(span->ptr, name, len) == 0) {
            if (type != NULL) *type = attrs->types[i];
            return attrs->values[i];
        }
    }
    return NULL;
}

/* A scalar attribute of the call (an integer or floating-point keyword of ffi_call), or NULL. */
static inline const EmberFfi_Scalar *ember_ffi_scalar(EmberFfi_CallFrame *frame, const char *name) {
    int type = 0;
    void *found = ember_ffi_attr(&frame->attrs, name, &type);
    return found != NULL && type == EMBER_FFI_ATTR_SCALAR ? (const EmberFfi_Scalar *)found : NULL;
}

/* An integer or floating-point scalar attribute as a double (fallback when absent or of another type). */
static inline double ember_ffi_scalar_as_double(EmberFfi_CallFrame *frame, const char *name, double fallback) {
    const EmberFfi_Scalar *s = ember_ffi_scalar(frame, name);
    if (s == NULL) return fallback;
    switch (s->dtype) {
        case EMBER_FFI_PRED: return *(const uint8_t *)s->value;
        case EMBER_FFI_S8: return *(const int8_t *)s->value;
        case EMBER_FFI_S16: return *(const int16_t *)s->value;
        case EMBER_FFI_S32: return *(const int32_t *)s->value;
        case EMBER_FFI_S64: return (double)*(const int64_t *)s->value;
        case EMBER_FFI_U8: return *(const uint8_t *)s->value;
        case EMBER_FFI_U16: return *(const uint16_t *)s->value;
        case EMBER_FFI_U32: return *(const uint32_t *)s->value;
        case EMBER_FFI_U64: return (double)*(const uint64_t *)s->value;
        case EMBER_FFI_F32: return *(const float *)s->value;
        case EMBER_FFI_F64: return *(const double *)s->value;
        default: return fallback;
    }
}

#ifdef __cplusplus
}
#endif

#endif
