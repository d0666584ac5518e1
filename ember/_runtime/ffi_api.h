/* ember/_runtime/ffi_api.h: the XLA FFI C API as ember's handlers use it (typed FFI, custom-call api_version 4).
 *
 * ember's own declarations, written from xla/ffi/api/c_api.h (XLA FFI API 0.x): only the structs and fields its
 * handlers use (_lapack.c, _rows.c), in the header's order, and the helpers every handler needs: returning an error
 * through the call frame's api, answering the metadata query XLA makes when a handler is registered, reading an
 * integer attribute, and (where Python.h came first) the dict of handlers an extension's handlers() returns. */
#ifndef EMBER_FFI_API_H
#define EMBER_FFI_API_H
#include <stdint.h>
#include <string.h>

/* ---- declarations ---------------------------------------------------------------------------- */
typedef struct Ffi_ExtensionBase {
    size_t struct_size;
    int type; /* 1: metadata */
    struct Ffi_ExtensionBase *next;
} Ffi_ExtensionBase;

typedef struct {
    size_t struct_size;
    Ffi_ExtensionBase *extension_start;
    int major_version;
    int minor_version;
} Ffi_ApiVersion;

typedef struct Ffi_Error Ffi_Error;

typedef struct {
    size_t struct_size;
    Ffi_ExtensionBase *extension_start;
    const char *message;
    int errc;
} Ffi_ErrorCreateArgs;

typedef Ffi_Error *Ffi_ErrorCreate(Ffi_ErrorCreateArgs *args);

typedef struct {
    size_t struct_size;
    Ffi_ExtensionBase *extension_start;
    Ffi_ApiVersion api_version;
    void *internal_api;
    Ffi_ErrorCreate *error_create; /* the first function of XLA_FFI_Api */
} Ffi_Api;

enum { /* XLA's primitive types (xla_data.proto's numbering) */
    FFI_PRED = 1, FFI_S8 = 2, FFI_S16 = 3, FFI_S32 = 4, FFI_S64 = 5, FFI_U8 = 6, FFI_U16 = 7, FFI_U32 = 8, FFI_U64 = 9,
    FFI_F16 = 10, FFI_F32 = 11, FFI_F64 = 12, FFI_C64 = 15, FFI_BF16 = 16, FFI_C128 = 18, FFI_TYPES = 32
};
enum { FFI_ERR_INVALID_ARGUMENT = 3, FFI_ERR_RESOURCE_EXHAUSTED = 8, FFI_ERR_UNIMPLEMENTED = 12 };
enum { FFI_ATTR_SCALAR = 3, FFI_EXECUTE = 3, FFI_EXTENSION_METADATA = 1 };

typedef struct {
    size_t struct_size;
    Ffi_ExtensionBase *extension_start;
    int dtype;
    void *data;
    int64_t rank;
    int64_t *dims;
} Ffi_Buffer;

typedef struct {
    size_t struct_size;
    Ffi_ExtensionBase *extension_start;
    int64_t size;
    int *types;
    void **args;
} Ffi_Args;

typedef struct {
    const char *ptr;
    size_t len;
} Ffi_ByteSpan;

typedef struct {
    int dtype;
    void *value;
} Ffi_Scalar;

typedef struct {
    size_t struct_size;
    Ffi_ExtensionBase *extension_start;
    int64_t size;
    int *types;
    Ffi_ByteSpan **names;
    void **attrs;
} Ffi_Attrs;

typedef struct {
    size_t struct_size;
    Ffi_ExtensionBase *extension_start;
    const Ffi_Api *api;
    void *ctx;
    int stage;
    Ffi_Args args;
    Ffi_Args rets; /* XLA_FFI_Rets has the same layout as XLA_FFI_Args */
    Ffi_Attrs attrs;
} Ffi_CallFrame;

typedef struct {
    size_t struct_size;
    Ffi_ApiVersion api_version;
    uint32_t traits;
} Ffi_Metadata;

typedef struct {
    Ffi_ExtensionBase base;
    Ffi_Metadata *metadata;
} Ffi_MetadataExtension;

/* ---- helpers -------------------------------------------------------------------------------------------- */
static inline Ffi_Error *fail(Ffi_CallFrame *frame, int code, const char *message) {
    Ffi_ErrorCreateArgs args;
    memset(&args, 0, sizeof args);
    args.struct_size = sizeof args;
    args.message = message;
    args.errc = code;
    return frame->api->error_create(&args);
}

/* The bytes of an element of an FFI dtype (0 for the types ember's kernels do not take). */
static inline int ffi_element_size(int dtype) {
    switch (dtype) {
        case FFI_PRED: case FFI_S8: case FFI_U8: return 1;
        case FFI_S16: case FFI_U16: case FFI_F16: case FFI_BF16: return 2;
        case FFI_S32: case FFI_U32: case FFI_F32: return 4;
        case FFI_S64: case FFI_U64: case FFI_F64: case FFI_C64: return 8;
        case FFI_C128: return 16;
        default: return 0;
    }
}

/* A handler is called once at registration with a metadata extension (which FFI version it speaks). */
static inline int answer_metadata(Ffi_CallFrame *frame) {
    Ffi_ExtensionBase *ext = frame->extension_start;
    if (ext == NULL || ext->type != FFI_EXTENSION_METADATA) return 0;
    Ffi_Metadata *md = ((Ffi_MetadataExtension *)ext)->metadata;
    md->api_version.major_version = frame->api->api_version.major_version;
    md->api_version.minor_version = frame->api->api_version.minor_version;
    md->traits = 0;
    return 1;
}

/* An integer attribute of the call (the lowering writes them as int64 scalars); fallback when absent. */
static inline int64_t attr_int(Ffi_CallFrame *frame, const char *name, int64_t fallback) {
    size_t len = strlen(name);
    for (int64_t i = 0; i < frame->attrs.size; i++) {
        Ffi_ByteSpan *span = frame->attrs.names[i];
        if (frame->attrs.types[i] != FFI_ATTR_SCALAR || span->len != len || memcmp(span->ptr, name, len) != 0)
            continue;
        Ffi_Scalar *s = (Ffi_Scalar *)frame->attrs.attrs[i];
        switch (s->dtype) {
            case FFI_S32: return *(int32_t *)s->value;
            case FFI_S64: return *(int64_t *)s->value;
            default: return fallback;
        }
    }
    return fallback;
}

#ifdef Py_PYTHON_H
/* A handler table as the dict handlers() returns: {custom-call target name: handler address}. */
typedef struct {
    const char *name;
    void *fn;
} Ffi_HandlerEntry;

static inline PyObject *handler_dict(const Ffi_HandlerEntry *table, size_t count) {
    PyObject *out = PyDict_New();
    if (out == NULL) return NULL;
    for (size_t i = 0; i < count; i++) {
        PyObject *address = PyLong_FromVoidPtr(table[i].fn);
        if (address == NULL || PyDict_SetItemString(out, table[i].name, address) < 0) {
            Py_XDECREF(address);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(address);
    }
    return out;
}
#endif

#endif
