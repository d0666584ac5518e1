/* ember._runtime._fastpath: the per-call hot path of ember's runtime in C.
 *
 * What it does, and the Python twin it mirrors (ember/_runtime/fastpath.py selects one set at import; the
 * Python twins are the reference behaviour, this file only makes the common case cheap):
 *   - the lifetime transitions of a Buffer (pin, unpin, delete)       <-> ember/_runtime/pjrt/buffer.py
 *   - Runner: runs a loaded PJRT executable on Buffers                 <-> _PyRunner in pjrt/executable.py
 *   - Caller: a Compiled program's call on Arrays (checks, consts,    <-> _PyCaller in compiler.py
 *     execute, Arrays out); anything uncommon returns None and the Python path handles it
 *   - block_until_ready and the Buffer finalizer.
 *   - from_host: a numpy array's data copied to a new Buffer      <-> Client.buffer_from_numpy in pjrt/client.py
 * It depends on the Python C API only. The few PJRT structs it uses are declared below, with the layout of
 * pjrt_c_api.h (API 0.81) of the xla-cpu-pjrt wheel (every struct starts with its size, as in the ctypes
 * binding, so newer plugins accept them). The ctypes declarations in pjrt/structs.py are the reference: buffer.py
 * checks these against them when it loads this module (struct_layouts). The PJRT function pointers come from the
 * ctypes binding (Api).
 *
 * THE PINNING ARGUMENT (why no lock is taken here). A Buffer's lifetime state is three slots: handle (an int,
 * None once deleted), _pins (an int: PJRT calls using it now), _doomed (None, or the handle of a buffer deleted
 * while pinned, destroyed by the last unpin). The Python implementation changes them under
 * buffer._lifetime_lock. Here every change of that state is a C section that holds the GIL from start to end
 * and, inside it, neither releases the GIL nor runs Python code: it reads and writes slots at their offsets,
 * creates ints (never a collection: ints are not tracked by the garbage collector) and drops ints and None
 * (no finalizer can run). No other Python thread can run in the middle of such a section, so each section is
 * atomic with respect to all other Python threads, and the sections are atomic with respect to each other.
 * When this module is in use EVERY transition of that state goes through these sections (buffer.py takes
 * pin/unpin/delete from here; the Python twins of Runner and Caller call pin_all/unpin_all from here), so no
 * Python code ever does a read-modify-write of _pins that a C section could interleave with; the lock is then
 * unused. The two implementations are never mixed in one process. A build without a GIL (free-threaded
 * CPython) breaks the argument: it is refused at compile time, and the Python path is used.
 *
 * Strong references: while the GIL is released around PJRT_LoadedExecutable_Execute, this code holds a strong
 * reference to every Buffer it pinned, so no Buffer can be finalized (its finalizer would find it pinned and
 * leave the handle to us, then the object would be freed under our feet) until it is unpinned.
 *
 * The client is pinned too around every PJRT call made with the GIL released (execute, upload, awaiting a ready
 * event): pin_client counts a use in the client's Api, in the same kind of ATOMIC section, and Client.close()
 * (the exit handler's, while daemon threads may still execute) marks the client closed, then waits until no
 * use is counted before destroying it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <semaphore.h>
#include <signal.h>
#include <pthread.h>
#include <time.h>

#ifdef Py_GIL_DISABLED
#error "ember._runtime._fastpath relies on the GIL (see THE PINNING ARGUMENT); the pure-Python path is used"
#endif

/* The interface version ember/_runtime/fastpath.py expects (_ABI there): bump both when the interface changes,
 * so that a stale build is not used. After editing this file, rebuild: python3 setup.py build_ext --inplace. */
#define FASTPATH_ABI 10

/* ---------------------------------------------------------------------------------------------------------
 * PJRT (pjrt_c_api.h, API 0.81)
 */
typedef struct PJRT_Error PJRT_Error;
typedef PJRT_Error *(*pjrt_fn)(void *args);

typedef struct { /* PJRT_Buffer_Destroy_Args, PJRT_Event_Await_Args, PJRT_Event_Destroy_Args */
    size_t struct_size;
    void *extension_start;
    void *handle;
} HandleArgs;

typedef struct { /* PJRT_Buffer_ReadyEvent_Args */
    size_t struct_size;
    void *extension_start;
    void *buffer;
    void *event; /* out */
} ReadyEventArgs;

typedef struct { /* PJRT_ExecuteOptions */
    size_t struct_size;
    void *extension_start;
    void **send_callbacks;
    void **recv_callbacks;
    size_t num_send_ops;
    size_t num_recv_ops;
    int launch_id;
    const int64_t *non_donatable_input_indices;
    size_t num_non_donatable_input_indices;
    void *context;
    const char *call_location;
    size_t num_tasks;
    int *task_ids;
    int64_t *incarnation_ids;
} ExecuteOptions;

typedef struct { /* PJRT_LoadedExecutable_Execute_Args */
    size_t struct_size;
    void *extension_start;
    void *executable;
    ExecuteOptions *options;
    void *const *const *argument_lists; /* [num_devices][num_args] */
    size_t num_devices;
    size_t num_args;
    void **const *output_lists; /* [num_devices][num_outputs], filled by PJRT */
    void **device_complete_events;
    void *execute_device;
} ExecuteArgs;

typedef struct { /* PJRT_Client_BufferFromHostBuffer_Args */
    size_t struct_size;
    void *extension_start;
    void *client;
    const void *data;
    int type; /* PJRT_Buffer_Type */
    const int64_t *dims;
    size_t num_dims;
    const int64_t *byte_strides;
    size_t num_byte_strides;
    int host_buffer_semantics; /* 0: kImmutableOnlyDuringCall (the data is copied before the event fires) */
    void *device;
    void *memory;
    void *device_layout;
    void *done_with_host_buffer; /* out */
    void *buffer;                /* out */
} FromHostArgs;

typedef struct { /* PJRT_Event_IsReady_Args */
    size_t struct_size;
    void *extension_start;
    void *event;
    _Bool is_ready; /* out */
} IsReadyArgs;

typedef void (*on_ready_fn)(PJRT_Error *error, void *user_arg); /* PJRT_Event_OnReadyCallback: owns the error */

typedef struct { /* PJRT_Event_OnReady_Args */
    size_t struct_size;
    void *extension_start;
    void *event;
    on_ready_fn callback;
    void *user_arg;
} OnReadyArgs;

typedef struct { /* PJRT_Buffer_UnsafePointer_Args */
    size_t struct_size;
    void *extension_start;
    void *buffer;
    uintptr_t buffer_pointer; /* out */
} UnsafePointerArgs;

/* The layouts of the structs above, reported by struct_layouts() for ember/_runtime/pjrt/structs.py to check
 * against its ctypes declarations (the reference) when the extension is loaded: each under the name of its
 * ctypes class there. */
typedef struct {
    const char *name;
    size_t offset;
} FieldLayout;

typedef struct {
    const char *name;
    size_t size;
    const FieldLayout *fields; /* ends with a NULL name */
} StructLayout;

#define FIELD(type, field) {#field, offsetof(type, field)}
#define HEADER(type) FIELD(type, struct_size), FIELD(type, extension_start)

static const FieldLayout handle_fields[] = {HEADER(HandleArgs), FIELD(HandleArgs, handle), {NULL}};
static const FieldLayout ready_event_fields[] = {HEADER(ReadyEventArgs), FIELD(ReadyEventArgs, buffer),
                                                 FIELD(ReadyEventArgs, event), {NULL}};
static const FieldLayout execute_options_fields[] = {
    HEADER(ExecuteOptions), FIELD(ExecuteOptions, send_callbacks), FIELD(ExecuteOptions, recv_callbacks),
    FIELD(ExecuteOptions, num_send_ops), FIELD(ExecuteOptions, num_recv_ops), FIELD(ExecuteOptions, launch_id),
    FIELD(ExecuteOptions, non_donatable_input_indices), FIELD(ExecuteOptions, num_non_donatable_input_indices),
    FIELD(ExecuteOptions, context), FIELD(ExecuteOptions, call_location), FIELD(ExecuteOptions, num_tasks),
    FIELD(ExecuteOptions, task_ids), FIELD(ExecuteOptions, incarnation_ids), {NULL}};
static const FieldLayout execute_fields[] = {
    HEADER(ExecuteArgs), FIELD(ExecuteArgs, executable), FIELD(ExecuteArgs, options),
    FIELD(ExecuteArgs, argument_lists), FIELD(ExecuteArgs, num_devices), FIELD(ExecuteArgs, num_args),
    FIELD(ExecuteArgs, output_lists), FIELD(ExecuteArgs, device_complete_events), FIELD(ExecuteArgs, execute_device),
    {NULL}};
static const FieldLayout from_host_fields[] = {
    HEADER(FromHostArgs), FIELD(FromHostArgs, client), FIELD(FromHostArgs, data), FIELD(FromHostArgs, type),
    FIELD(FromHostArgs, dims), FIELD(FromHostArgs, num_dims), FIELD(FromHostArgs, byte_strides),
    FIELD(FromHostArgs, num_byte_strides), FIELD(FromHostArgs, host_buffer_semantics), FIELD(FromHostArgs, device),
    FIELD(FromHostArgs, memory), FIELD(FromHostArgs, device_layout), FIELD(FromHostArgs, done_with_host_buffer),
    FIELD(FromHostArgs, buffer), {NULL}};
static const FieldLayout is_ready_fields[] = {HEADER(IsReadyArgs), FIELD(IsReadyArgs, event),
                                             FIELD(IsReadyArgs, is_ready), {NULL}};
static const FieldLayout on_ready_fields[] = {HEADER(OnReadyArgs), FIELD(OnReadyArgs, event),
                                             FIELD(OnReadyArgs, callback), FIELD(OnReadyArgs, user_arg), {NULL}};
static const FieldLayout unsafe_pointer_fields[] = {HEADER(UnsafePointerArgs), FIELD(UnsafePointerArgs, buffer),
                                                    FIELD(UnsafePointerArgs, buffer_pointer), {NULL}};

static const StructLayout struct_layouts[] = {
    {"PJRT_Handle_Args", sizeof(HandleArgs), handle_fields},
    {"PJRT_Buffer_ReadyEvent_Args", sizeof(ReadyEventArgs), ready_event_fields},
    {"PJRT_ExecuteOptions", sizeof(ExecuteOptions), execute_options_fields},
    {"PJRT_LoadedExecutable_Execute_Args", sizeof(ExecuteArgs), execute_fields},
    {"PJRT_Client_BufferFromHostBuffer_Args", sizeof(FromHostArgs), from_host_fields},
    {"PJRT_Buffer_UnsafePointer_Args", sizeof(UnsafePointerArgs), unsafe_pointer_fields},
    {"PJRT_Event_IsReady_Args", sizeof(IsReadyArgs), is_ready_fields},
    {"PJRT_Event_OnReady_Args", sizeof(OnReadyArgs), on_ready_fields},
    {NULL},
};

/* struct_layouts() -> {name: (size, ((field, offset), ...))} of the structs declared here. */
static PyObject *fp_struct_layouts(PyObject *module, PyObject *unused)
{
    PyObject *result = PyDict_New();
    for (const StructLayout *layout = struct_layouts; result != NULL && layout->name != NULL; layout++) {
        Py_ssize_t count = 0;
        while (layout->fields[count].name != NULL)
            count++;
        PyObject *fields = PyTuple_New(count), *entry = NULL;
        for (Py_ssize_t i = 0; fields != NULL && i < count; i++) {
            PyObject *field = Py_BuildValue("(sn)", layout->fields[i].name, (Py_ssize_t)layout->fields[i].offset);
            if (field == NULL)
                Py_CLEAR(fields);
            else
                PyTuple_SET_ITEM(fields, i, field);
        }
        if (fields != NULL)
            entry = Py_BuildValue("(nN)", (Py_ssize_t)layout->size, fields); /* (steals fields) */
        if (entry == NULL || PyDict_SetItemString(result, layout->name, entry) < 0)
            Py_CLEAR(result);
        Py_XDECREF(entry);
    }
    return result;
}

/* ---------------------------------------------------------------------------------------------------------
 * Module state. One interpreter; the types are registered once by buffer.py and array.py.
 */
static PyTypeObject *buffer_type; /* ember._runtime.pjrt.buffer.Buffer (strong reference) */
static Py_ssize_t b_client, b_device, b_handle, b_shape, b_dtype, b_pins, b_doomed; /* its slot offsets */
static PyTypeObject *array_type;  /* ember._runtime.array.Array */
static PyTypeObject *ndarray_type; /* numpy.ndarray (Callers upload exact numpy arguments), or NULL */
#define MAX_DIMS 64
static Py_ssize_t a_buffer, a_aval, a_host, a_origin, a_committed;
static int checks_active;         /* debug_nans / debug_infs: every Caller defers to Python */

static PyObject *str_handle, *str_destroy, *str_fast, *str_shape, *str_dtype;

#define SLOT(obj, offset) (*(PyObject **)((char *)(obj) + (offset)))

static int slot_offset(PyTypeObject *type, const char *name, Py_ssize_t *offset)
{
    PyObject *descr = PyObject_GetAttrString((PyObject *)type, name);
    if (descr == NULL)
        return -1;
    int ok = Py_IS_TYPE(descr, &PyMemberDescr_Type);
    if (ok) {
        PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
        ok = member->type == T_OBJECT_EX && !(member->flags & READONLY) && member->offset > 0 &&
             member->offset + (Py_ssize_t)sizeof(PyObject *) <= type->tp_basicsize;
        *offset = member->offset;
    }
    Py_DECREF(descr);
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "%s.%s is not a __slots__ attribute", type->tp_name, name);
        return -1;
    }
    return 0;
}

/* The class must have exactly these __slots__ (the C side creates instances without running __init__ and
 * must initialize every slot: a new slot in the Python class has to be added here too). */
static int check_slots(PyTypeObject *type, const char *expected)
{
    PyObject *slots = PyObject_GetAttrString((PyObject *)type, "__slots__");
    if (slots == NULL)
        return -1;
    PyObject *joined = NULL, *sep = PyUnicode_FromString(" ");
    PyObject *tuple = sep ? PySequence_Tuple(slots) : NULL;
    if (tuple)
        joined = PyUnicode_Join(sep, tuple);
    int result = -1;
    if (joined) {
        if (PyUnicode_CompareWithASCIIString(joined, expected) == 0)
            result = 0;
        else
            PyErr_Format(PyExc_TypeError, "%s.__slots__ is (%U); ember._runtime._fastpath expects (%s)",
                         type->tp_name, joined, expected);
    }
    Py_XDECREF(joined);
    Py_XDECREF(tuple);
    Py_XDECREF(sep);
    Py_DECREF(slots);
    return result;
}

/* (Both register_* functions change nothing unless every check passes.) */
static PyObject *register_buffer_type(PyObject *module, PyObject *cls)
{
    if (!PyType_Check(cls) || !(((PyTypeObject *)cls)->tp_flags & Py_TPFLAGS_HEAPTYPE))
        return PyErr_Format(PyExc_TypeError, "register_buffer_type: expected a class");
    PyTypeObject *type = (PyTypeObject *)cls;
    Py_ssize_t client, device, handle, shape, dtype, pins, doomed;
    if (check_slots(type, "client device handle shape dtype _pins _doomed __weakref__") < 0 ||
        slot_offset(type, "client", &client) < 0 || slot_offset(type, "device", &device) < 0 ||
        slot_offset(type, "handle", &handle) < 0 || slot_offset(type, "shape", &shape) < 0 ||
        slot_offset(type, "dtype", &dtype) < 0 || slot_offset(type, "_pins", &pins) < 0 ||
        slot_offset(type, "_doomed", &doomed) < 0)
        return NULL;
    if (buffer_type != NULL && buffer_type != type)
        return PyErr_Format(PyExc_RuntimeError, "register_buffer_type: another Buffer class is registered");
    b_client = client, b_device = device, b_handle = handle, b_shape = shape, b_dtype = dtype, b_pins = pins;
    b_doomed = doomed;
    Py_XSETREF(buffer_type, (PyTypeObject *)Py_NewRef(cls));
    Py_RETURN_NONE;
}

static PyObject *register_array_type(PyObject *module, PyObject *cls)
{
    if (!PyType_Check(cls) || !(((PyTypeObject *)cls)->tp_flags & Py_TPFLAGS_HEAPTYPE))
        return PyErr_Format(PyExc_TypeError, "register_array_type: expected a class");
    PyTypeObject *type = (PyTypeObject *)cls;
    if (type->tp_flags & Py_TPFLAGS_IS_ABSTRACT)
        return PyErr_Format(PyExc_TypeError, "register_array_type: %s is abstract", type->tp_name);
    Py_ssize_t buffer, aval, host, origin, committed;
    if (check_slots(type, "_buffer aval _host _origin _committed __weakref__") < 0 ||
        slot_offset(type, "_buffer", &buffer) < 0 || slot_offset(type, "aval", &aval) < 0 ||
        slot_offset(type, "_host", &host) < 0 || slot_offset(type, "_origin", &origin) < 0 ||
        slot_offset(type, "_committed", &committed) < 0)
        return NULL;
    if (array_type != NULL && array_type != type)
        return PyErr_Format(PyExc_RuntimeError, "register_array_type: another Array class is registered");
    a_buffer = buffer, a_aval = aval, a_host = host, a_origin = origin, a_committed = committed;
    Py_XSETREF(array_type, (PyTypeObject *)Py_NewRef(cls));
    Py_RETURN_NONE;
}

static int ready(void)
{
    if (buffer_type == NULL || array_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "ember._runtime._fastpath: the Buffer and Array types are not registered");
        return 0;
    }
    return 1;
}

static PyObject *register_ndarray_type(PyObject *module, PyObject *cls)
{
    if (!PyType_Check(cls))
        return PyErr_Format(PyExc_TypeError, "register_ndarray_type: expected a type");
    Py_XSETREF(ndarray_type, (PyTypeObject *)Py_NewRef(cls));
    Py_RETURN_NONE;
}

static PyObject *set_checks_active(PyObject *module, PyObject *flag)
{
    int value = PyObject_IsTrue(flag);
    if (value < 0)
        return NULL;
    checks_active = value;
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------------------------------------------------
 * Buffer lifetime transitions. Each function marked ATOMIC runs no Python code and keeps the GIL (see THE
 * PINNING ARGUMENT at the top); each takes a Buffer of exactly buffer_type.
 */

/* The handle of a live buffer, or NULL (deleted: None; or anything unexpected). ATOMIC. */
static void *live_handle(PyObject *buffer)
{
    PyObject *handle = SLOT(buffer, b_handle);
    if (handle == NULL || !PyLong_CheckExact(handle))
        return NULL; /* None once deleted */
    void *pointer = PyLong_AsVoidPtr(handle); /* an exact int: no Python code */
    if (pointer == NULL)
        PyErr_Clear(); /* 0, or out of range: not a live handle */
    return pointer;
}

static int add_pins(PyObject *buffer, Py_ssize_t delta, Py_ssize_t *result)
{
    PyObject *pins = SLOT(buffer, b_pins);
    if (pins == NULL || !PyLong_CheckExact(pins)) {
        PyErr_SetString(PyExc_SystemError, "Buffer._pins is not an int");
        return -1;
    }
    Py_ssize_t count = PyLong_AsSsize_t(pins) + delta;
    PyObject *updated = PyLong_FromSsize_t(count); /* an int: never starts a garbage collection */
    if (updated == NULL)
        return -1;
    Py_SETREF(SLOT(buffer, b_pins), updated); /* drops an int: no finalizer */
    *result = count;
    return 0;
}

/* Pin a buffer of `client` (any client when NULL): its handle, or NULL when it is deleted or belongs to another
 * client (no error set), or NULL with an error set. ATOMIC. */
static void *pin_one(PyObject *buffer, PyObject *client)
{
    void *handle = live_handle(buffer);
    if (handle == NULL || (client != NULL && SLOT(buffer, b_client) != client))
        return NULL;
    Py_ssize_t count;
    if (add_pins(buffer, 1, &count) < 0)
        return NULL;
    return handle;
}

/* Unpin a buffer; when that ends the last pin of a buffer deleted meanwhile, its doomed handle (a new
 * reference) is moved to *doomed for the caller to destroy (exactly once: the slot is cleared here). ATOMIC. */
static int unpin_one(PyObject *buffer, PyObject **doomed)
{
    Py_ssize_t count;
    *doomed = NULL;
    if (add_pins(buffer, -1, &count) < 0)
        return -1;
    if (count == 0) {
        PyObject *handle = SLOT(buffer, b_doomed);
        if (handle != NULL && handle != Py_None) {
            SLOT(buffer, b_doomed) = Py_NewRef(Py_None);
            *doomed = handle; /* the slot's reference moves to the caller */
        }
    }
    return 0;
}

/* Destroy doomed handles: buffer._destroy(handle) in Python (a rare path), as the Python twin does. Consumes the
 * references in doomed[]; returns -1 with the first error set if one failed (all are attempted). */
static int destroy_doomed(PyObject *const *buffers, PyObject **doomed, Py_ssize_t n)
{
    PyObject *type = NULL, *value = NULL, *traceback = NULL; /* the first error */
    for (Py_ssize_t i = 0; i < n; i++) {
        if (doomed[i] == NULL)
            continue;
        PyObject *done = PyObject_CallMethodOneArg(buffers[i], str_destroy, doomed[i]);
        Py_CLEAR(doomed[i]);
        if (done != NULL)
            Py_DECREF(done);
        else if (type == NULL)
            PyErr_Fetch(&type, &value, &traceback); /* (no call runs with an error set) */
        else
            PyErr_Clear();
    }
    if (type == NULL)
        return 0;
    PyErr_Restore(type, value, traceback);
    return -1;
}

/* A client's handle (client.handle): NULL when it is closed (None), or NULL with an error set. */
static void *client_handle_of(PyObject *client)
{
    PyObject *handle = PyObject_GetAttr(client, str_handle);
    void *pointer = handle != NULL && PyLong_CheckExact(handle) ? PyLong_AsVoidPtr(handle) : NULL;
    Py_XDECREF(handle);
    return pointer;
}

/* Whether a client is open (it has a handle): 1, 0, or -1 with an error. Reads a Python attribute: not for an
 * ATOMIC section. */
static int client_open(PyObject *client)
{
    if (client_handle_of(client) != NULL)
        return 1;
    return PyErr_Occurred() ? -1 : 0;
}

static int check_buffer(PyObject *buffer, const char *who)
{
    if (!ready())
        return -1;
    if (!Py_IS_TYPE(buffer, buffer_type)) {
        PyErr_Format(PyExc_TypeError, "%s: expected a Buffer, got %.200s", who, Py_TYPE(buffer)->tp_name);
        return -1;
    }
    return 0;
}

/* pin(buffer) -> its handle (int), or None when it has been deleted. Does not look at its client. */
static PyObject *fp_pin(PyObject *module, PyObject *buffer)
{
    if (check_buffer(buffer, "pin") < 0)
        return NULL;
    void *handle = pin_one(buffer, NULL);
    if (handle == NULL) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }
    return PyLong_FromVoidPtr(handle);
}

/* unpin(buffer): ends a pin; destroys the buffer if it was deleted while pinned and this was its last pin. */
static PyObject *fp_unpin(PyObject *module, PyObject *buffer)
{
    if (check_buffer(buffer, "unpin") < 0)
        return NULL;
    PyObject *doomed;
    if (unpin_one(buffer, &doomed) < 0)
        return NULL;
    if (destroy_doomed(&buffer, &doomed, 1) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* take_handle(buffer) -> the handle to destroy now, or None: marks the buffer deleted (idempotent); a pinned
 * buffer's handle is left in _doomed for its last unpin. ATOMIC (the transition of Buffer.delete). */
static PyObject *take_handle(PyObject *buffer)
{
    PyObject *handle = SLOT(buffer, b_handle);
    if (handle == NULL || handle == Py_None)
        Py_RETURN_NONE;
    if (!PyLong_CheckExact(handle))
        return PyErr_Format(PyExc_SystemError, "Buffer.handle is a %.200s", Py_TYPE(handle)->tp_name);
    PyObject *pins = SLOT(buffer, b_pins);
    if (pins == NULL || !PyLong_CheckExact(pins))
        return PyErr_Format(PyExc_SystemError, "Buffer._pins is not an int");
    /* (both exact ints: neither call runs Python code) */
    Py_ssize_t count = PyLong_AsSsize_t(pins);
    int live = PyObject_IsTrue(handle); /* handle 0 counts as deleted, as in Python */
    if (count == -1 && PyErr_Occurred())
        return NULL;
    SLOT(buffer, b_handle) = Py_NewRef(Py_None); /* the slot's reference to handle moves to us */
    if (!live) {
        Py_DECREF(handle);
        Py_RETURN_NONE;
    }
    if (count != 0) { /* pinned: its last unpin destroys it */
        Py_SETREF(SLOT(buffer, b_doomed), handle); /* drops None (or an int): no finalizer */
        Py_RETURN_NONE;
    }
    return handle;
}

static PyObject *fp_take_handle(PyObject *module, PyObject *buffer)
{
    if (check_buffer(buffer, "take_handle") < 0)
        return NULL;
    return take_handle(buffer);
}

/* pin_all(buffers, client, handles) -> -1 when every buffer is pinned (their handles written to the ctypes
 * array handles), else the index of the first one that is not a live Buffer of client (none is left pinned). */
static PyObject *fp_pin_all(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3)
        return PyErr_Format(PyExc_TypeError, "pin_all takes 3 arguments (%zd given)", nargs);
    if (!ready())
        return NULL;
    PyObject *seq = PySequence_Fast(args[0], "pin_all: buffers must be a sequence");
    if (seq == NULL)
        return NULL;
    PyObject *client = args[1];
    Py_buffer view;
    if (PyObject_GetBuffer(args[2], &view, PyBUF_WRITABLE) < 0) {
        Py_DECREF(seq);
        return NULL;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject *result = NULL;
    if (view.len < n * (Py_ssize_t)sizeof(void *)) {
        PyErr_SetString(PyExc_ValueError, "pin_all: the handle array is too small");
        goto done;
    }
    PyObject **items = PySequence_Fast_ITEMS(seq);
    void **handles = (void **)view.buf;
    /* ATOMIC from here to the end of the loops (a list's items cannot change meanwhile either). */
    Py_ssize_t i;
    for (i = 0; i < n; i++) {
        if (!Py_IS_TYPE(items[i], buffer_type) || (handles[i] = pin_one(items[i], client)) == NULL)
            break;
    }
    if (i < n) {
        int failed = PyErr_Occurred() != NULL;
        for (Py_ssize_t j = 0; j < i; j++) {
            PyObject *doomed;
            (void)unpin_one(items[j], &doomed); /* nothing ran since the pin: no buffer can be doomed */
            assert(doomed == NULL);
        }
        if (!failed)
            result = PyLong_FromSsize_t(i);
        goto done;
    }
    result = PyLong_FromLong(-1);
done:
    PyBuffer_Release(&view);
    Py_DECREF(seq);
    return result;
}

/* Unpin each of a sequence of pinned buffers; destroy those deleted meanwhile whose last pin this was. */
static int unpin_many(PyObject *const *buffers, Py_ssize_t n, PyObject **doomed)
{
    /* ATOMIC: the loop. A failure inside it (an int allocation) leaves no consistent way on: it cannot happen
     * for pin counts below 2**30 (ints of one digit are preallocated or allocated without a collection), and
     * the counts are small. */
    int status = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (unpin_one(buffers[i], &doomed[i]) < 0)
            status = -1;
    }
    if (status < 0) {
        for (Py_ssize_t i = 0; i < n; i++)
            Py_CLEAR(doomed[i]);
        return -1;
    }
    return destroy_doomed(buffers, doomed, n);
}

static PyObject *fp_unpin_all(PyObject *module, PyObject *buffers)
{
    if (!ready())
        return NULL;
    PyObject *seq = PySequence_Tuple(buffers); /* a copy: destroy_doomed runs Python code */
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!Py_IS_TYPE(PyTuple_GET_ITEM(seq, i), buffer_type)) {
            Py_DECREF(seq);
            return PyErr_Format(PyExc_TypeError, "unpin_all: item %zd is not a Buffer", i);
        }
    }
    PyObject **doomed = PyMem_Calloc(n ? n : 1, sizeof(PyObject *));
    if (doomed == NULL) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    int status = unpin_many(&PyTuple_GET_ITEM(seq, 0), n, doomed);
    PyMem_Free(doomed);
    Py_DECREF(seq);
    if (status < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------------------------------------------------
 * Api: the PJRT functions of one client, and the converter of PJRT errors (Plugin.error). Stored as
 * client._fast by Client.
 */
typedef struct {
    PyObject_HEAD
    pjrt_fn execute, buffer_destroy, ready_event, event_await, event_destroy, from_host, unsafe_pointer;
    pjrt_fn event_is_ready, event_on_ready, error_destroy; /* for interruptible waits (NULL: plain waits) */
    PyObject *error; /* plugin.error(name, address) -> PjrtError (it destroys the PJRT_Error) */
    Py_ssize_t uses; /* PJRT calls running on the client with the GIL released (see pin_client) */
} ApiObject;

static int api_traverse(ApiObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->error);
    return 0;
}

static int api_clear(ApiObject *self)
{
    Py_CLEAR(self->error);
    return 0;
}

static void api_dealloc(ApiObject *self)
{
    PyObject_GC_UnTrack(self);
    api_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int read_function(PyObject *value, pjrt_fn *out)
{
    if (value == Py_None) {
        *out = NULL;
        return 0;
    }
    void *pointer = PyLong_AsVoidPtr(value);
    if (pointer == NULL && PyErr_Occurred())
        return -1;
    *out = (pjrt_fn)pointer;
    return 0;
}

/* Api(execute, buffer_destroy, ready_event, event_await, event_destroy, error, from_host=None,
 * unsafe_pointer=None, is_ready=None, on_ready=None, error_destroy=None): function addresses (ints, or None when
 * the plugin lacks the function), and Plugin.error. */
static PyObject *api_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *execute, *buffer_destroy, *ready_event, *event_await, *event_destroy, *error, *from_host = Py_None,
             *unsafe_pointer = Py_None, *is_ready = Py_None, *on_ready = Py_None, *error_destroy = Py_None;
    static char *names[] = {"execute", "buffer_destroy", "ready_event", "event_await", "event_destroy", "error",
                            "from_host", "unsafe_pointer", "is_ready", "on_ready", "error_destroy", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOO|OOOOO:Api", names, &execute, &buffer_destroy,
                                     &ready_event, &event_await, &event_destroy, &error, &from_host, &unsafe_pointer,
                                     &is_ready, &on_ready, &error_destroy))
        return NULL;
    ApiObject *self = (ApiObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    if (read_function(execute, &self->execute) < 0 || read_function(buffer_destroy, &self->buffer_destroy) < 0 ||
        read_function(ready_event, &self->ready_event) < 0 || read_function(event_await, &self->event_await) < 0 ||
        read_function(event_destroy, &self->event_destroy) < 0 || read_function(from_host, &self->from_host) < 0 ||
        read_function(unsafe_pointer, &self->unsafe_pointer) < 0 || read_function(is_ready, &self->event_is_ready) < 0 ||
        read_function(on_ready, &self->event_on_ready) < 0 || read_function(error_destroy, &self->error_destroy) < 0) {
        Py_DECREF(self);
        return NULL;
    }
    if (self->execute == NULL || self->buffer_destroy == NULL) {
        Py_DECREF(self);
        return PyErr_Format(PyExc_ValueError, "Api: the plugin must provide Execute and Buffer_Destroy");
    }
    self->error = Py_NewRef(error);
    return (PyObject *)self;
}

/* Set the Python error for a PJRT_Error returned by PJRT_<name> (consumes the PJRT_Error). Returns -1. */
static int raise_pjrt_error(ApiObject *api, const char *name, PJRT_Error *error)
{
    PyObject *address = PyLong_FromVoidPtr(error);
    if (address == NULL)
        return -1; /* (the PJRT_Error leaks: out of memory already) */
    PyObject *exception = PyObject_CallFunction(api->error, "sO", name, address);
    Py_DECREF(address);
    if (exception == NULL)
        return -1;
    if (PyExceptionInstance_Check(exception))
        PyErr_SetObject((PyObject *)Py_TYPE(exception), exception);
    else
        PyErr_Format(PyExc_SystemError, "Plugin.error returned a %.200s", Py_TYPE(exception)->tp_name);
    Py_DECREF(exception);
    return -1;
}

/* Destroy a PJRT buffer nobody owns (outputs not wrapped because of an earlier failure); errors are dropped,
 * keeping the error being raised. */
static void destroy_unowned(ApiObject *api, void *handle)
{
    HandleArgs args = {sizeof(HandleArgs), NULL, handle};
    PJRT_Error *error = api->buffer_destroy(&args);
    if (error != NULL) {
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        raise_pjrt_error(api, "Buffer_Destroy", error);
        PyErr_Clear();
        PyErr_Restore(type, value, traceback);
    }
}

/* Await a PJRT event (the GIL released) and destroy it: 0, or -1 with the error set as PJRT_<name>'s. */
static int await_event(ApiObject *api, const char *name, void *event);

/* The dimensions of a shape tuple (of at most MAX_DIMS ints) as int64s: 0, or -1 with an error set (a negative
 * dimension is a ValueError). */
static int read_dims(PyObject *shape, int64_t *dims)
{
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(shape); i++) {
        long long d = PyLong_AsLongLong(PyTuple_GET_ITEM(shape, i));
        if (d == -1 && PyErr_Occurred())
            return -1;
        if (d < 0) {
            PyErr_Format(PyExc_ValueError, "negative dimension %lld in the shape %R", d, shape);
            return -1;
        }
        dims[i] = (int64_t)d;
    }
    return 0;
}

/* Copy C-contiguous, native-order host data of a shape and PJRT type to a new PJRT buffer on a device, the GIL
 * released during the copy (the caller keeps the data alive and unchanged): its handle, or NULL with an error
 * set. The API must have from_host, event_await and event_destroy. */
static void *upload(ApiObject *api, void *client_handle, void *device_handle, const void *data, int type,
                    const int64_t *dims, Py_ssize_t ndim)
{
    FromHostArgs call;
    memset(&call, 0, sizeof call);
    call.struct_size = sizeof call;
    call.client = client_handle;
    call.data = data;
    call.type = type;
    call.dims = dims;
    call.num_dims = (size_t)ndim;
    call.device = device_handle;
    PJRT_Error *error;
    Py_BEGIN_ALLOW_THREADS
    error = api->from_host(&call);
    Py_END_ALLOW_THREADS
    if (error != NULL) {
        raise_pjrt_error(api, "Client_BufferFromHostBuffer", error);
        return NULL;
    }
    if (await_event(api, "Client_BufferFromHostBuffer", call.done_with_host_buffer) < 0) {
        destroy_unowned(api, call.buffer);
        return NULL;
    }
    return call.buffer;
}


static PyObject *api_of(PyObject *client); /* below */

static PyMemberDef api_members[] = {
    {"uses", T_PYSSIZET, offsetof(ApiObject, uses), READONLY,
     "PJRT calls running on the client now with the GIL released: Client.close() waits for them to end."},
    {NULL},
};

static PyTypeObject ApiType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ember._runtime._fastpath.Api",
    .tp_basicsize = sizeof(ApiObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The PJRT functions of a client used by the fast path (client._fast).",
    .tp_new = api_new,
    .tp_dealloc = (destructor)api_dealloc,
    .tp_traverse = (traverseproc)api_traverse,
    .tp_clear = (inquiry)api_clear,
    .tp_members = api_members,
};

/* client._fast as an Api (a new reference), or NULL with an error. */
static PyObject *api_of(PyObject *client)
{
    PyObject *api = PyObject_GetAttr(client, str_fast);
    if (api != NULL && !Py_IS_TYPE(api, &ApiType)) {
        Py_DECREF(api);
        PyErr_SetString(PyExc_TypeError, "client._fast is not an ember._runtime._fastpath.Api");
        return NULL;
    }
    return api;
}

/* The Api of a buffer's client when that client is open (a new reference); NULL when it is closed (no error
 * set), or NULL with an error set. */
static ApiObject *open_api_of(PyObject *buffer)
{
    PyObject *client = SLOT(buffer, b_client);
    if (client == NULL)
        return NULL;
    Py_INCREF(client);
    ApiObject *api = (ApiObject *)api_of(client);
    int open = api ? client_open(client) : -1;
    Py_DECREF(client);
    if (open <= 0)
        Py_CLEAR(api);
    return api;
}

/* Pin a client for a PJRT call made with the GIL released: its handle, a use counted in its Api until
 * unpin_client; NULL when it is closed (no error set), or NULL with an error set. Client.close() marks the client
 * closed (its handle None) and then waits until its Api counts no use before destroying it, so a call that pinned
 * the client never runs on a destroyed one (the exit handler closes clients while daemon threads may execute).
 * ATOMIC: it reads a plain attribute (no Python code runs) and counts, holding the GIL. */
static void *pin_client(ApiObject *api, PyObject *client)
{
    void *handle = client_handle_of(client);
    if (handle != NULL)
        api->uses++;
    return handle;
}

static void unpin_client(ApiObject *api)
{
    api->uses--;
}

/* pin_client(client) -> its handle (int), a use counted until unpin_client(client); None when it is closed. */
static PyObject *fp_pin_client(PyObject *module, PyObject *client)
{
    ApiObject *api = (ApiObject *)api_of(client);
    if (api == NULL)
        return NULL;
    void *handle = pin_client(api, client);
    Py_DECREF(api);
    if (handle == NULL) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }
    return PyLong_FromVoidPtr(handle);
}

static PyObject *fp_unpin_client(PyObject *module, PyObject *client)
{
    ApiObject *api = (ApiObject *)api_of(client);
    if (api == NULL)
        return NULL;
    if (api->uses <= 0) {
        Py_DECREF(api);
        return PyErr_Format(PyExc_RuntimeError, "unpin_client: the client is not pinned");
    }
    unpin_client(api);
    Py_DECREF(api);
    Py_RETURN_NONE;
}

/* ---------------------------------------------------------------------------------------------------------
 * Scratch arrays: on the stack for up to SMALL buffers, else on the heap.
 */
#define SMALL 16

typedef struct {
    PyObject *buffers_small[SMALL];
    void *handles_small[SMALL];
    PyObject *doomed_small[SMALL];
    void *outputs_small[SMALL];
    PyObject **buffers;
    void **handles;
    PyObject **doomed;
    void **outputs;
    void *heap;
} Scratch;

static int scratch_init(Scratch *s, Py_ssize_t n, Py_ssize_t num_outputs)
{
    s->heap = NULL;
    s->buffers = s->buffers_small;
    s->handles = s->handles_small;
    s->doomed = s->doomed_small;
    s->outputs = s->outputs_small;
    if (n <= SMALL && num_outputs <= SMALL)
        return 0;
    Py_ssize_t m = n > 0 ? n : 1, k = num_outputs > 0 ? num_outputs : 1;
    char *heap = PyMem_Calloc(3 * m + k, sizeof(void *));
    if (heap == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    s->heap = heap;
    s->buffers = (PyObject **)heap;
    s->handles = (void **)(heap + m * sizeof(void *));
    s->doomed = (PyObject **)(heap + 2 * m * sizeof(void *));
    s->outputs = (void **)(heap + 3 * m * sizeof(void *));
    return 0;
}

static void scratch_free(Scratch *s)
{
    PyMem_Free(s->heap);
}

/* ---------------------------------------------------------------------------------------------------------
 * Runner: runs one loaded executable (made by Executable, which owns the PJRT executable and outlives every
 * call of its Runner: the caller of a Runner holds the Executable or, for a Caller, the Caller does).
 */
typedef struct {
    PyObject_HEAD
    ApiObject *api;
    PyObject *client;
    void *executable;
    Py_ssize_t num_outputs;
    PyObject *owner;   /* a weak reference to the Executable owning the PJRT executable, or NULL */
    char interruptible; /* execute on a helper thread when called on the main thread (see "Interruptible") */
} RunnerObject;

static int runner_traverse(RunnerObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->api);
    Py_VISIT(self->client);
    Py_VISIT(self->owner);
    return 0;
}

static int runner_clear(RunnerObject *self)
{
    Py_CLEAR(self->api);
    Py_CLEAR(self->client);
    Py_CLEAR(self->owner);
    return 0;
}

static void runner_dealloc(RunnerObject *self)
{
    PyObject_GC_UnTrack(self);
    runner_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Runner(client, handle, num_outputs, owner=None): the Api comes from client._fast; owner: the Executable that
 * owns the PJRT executable (held weakly; strongly by an interrupted execution until it ends). */
static PyObject *runner_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *client, *handle, *owner = Py_None;
    Py_ssize_t num_outputs;
    static char *names[] = {"client", "handle", "num_outputs", "owner", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOn|O:Runner", names, &client, &handle, &num_outputs, &owner))
        return NULL;
    void *executable = PyLong_AsVoidPtr(handle);
    if (executable == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "Runner: the executable handle is null");
        return NULL;
    }
    if (num_outputs < 0)
        return PyErr_Format(PyExc_ValueError, "Runner: num_outputs must be >= 0");
    PyObject *api = api_of(client);
    if (api == NULL)
        return NULL;
    RunnerObject *self = (RunnerObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        Py_DECREF(api);
        return NULL;
    }
    self->api = (ApiObject *)api;
    self->client = Py_NewRef(client);
    self->executable = executable;
    self->num_outputs = num_outputs;
    if (owner != Py_None && (self->owner = PyWeakref_NewRef(owner, NULL)) == NULL) {
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

/* RUN_ABANDONED: a signal handler raised while an interruptible execution ran (its error is set); the execution
 * goes on in the background, and the buffers and the client stay pinned until it is reaped. */
enum { RUN_OK = 0, RUN_NOT_PINNED = 1, RUN_ERROR = -1, RUN_ABANDONED = -2 };

/* ---------------------------------------------------------------------------------------------------------
 * Interruptible executions. The CPU plugin runs a program it estimates cheap (its estimate counts a loop's body
 * once and a custom call as nothing) inside PJRT_LoadedExecutable_Execute, on the calling thread; Python runs
 * signal handlers only on the main thread, between bytecodes, so Ctrl-C waited for the end of such a program
 * (seconds, minutes). A Runner marked interruptible (compiler.py marks the programs that may run long inline:
 * loops, custom calls) therefore hands the execute call, when made on the main thread, to a helper thread, and
 * the main thread waits for it in steps (the GIL released), running the signal handlers between them. When a
 * handler raises (KeyboardInterrupt), the call raises at once and the execution is abandoned: it goes on in the
 * background, its arguments, its client and its Executable stay pinned (held), and once it ends, reap_executions
 * (called at the next execution, by Client.close while it waits for the client's calls, and at exit) unpins them
 * and destroys its outputs, under the GIL, in an ATOMIC section as every pin change. The helper threads run no
 * Python code, never take the GIL and block every signal. One helper thread is kept for the process (it waits
 * on a semaphore between executions); while it runs an abandoned execution, another execution gets a thread of
 * its own. Measured on the 2-core machine: a call of a tiny program with a loop costs 1.5-2.3 us more (4.3 -> 5.8
 * us); programs without loops or custom calls are not marked (2.8 us, unchanged).
 */
typedef struct Job {
    ExecuteOptions options;
    ExecuteArgs call;
    void *const *argument_lists[1];
    void **output_lists[1];
    pjrt_fn execute;
    PJRT_Error *error;    /* the execute call's (written by the helper before finished) */
    int finished;         /* atomic: the execute call has returned */
    int refs;             /* atomic: the waiter's (then the reaper's) and the helper's */
    sem_t done;           /* posted by the helper after finished */
    struct Job *next;     /* in the list of abandoned executions */
    RunnerObject *runner; /* held by an abandoned execution, with owner and the buffers (strong references) */
    PyObject *owner;
    PyObject **buffers;
    PyObject **doomed;
    Py_ssize_t n;
    void **handles;       /* n argument handles, then num_outputs outputs: in the same allocation */
    void **outputs;
} Job;

#define WAIT_STEP_NS 50000000L /* an interruptible wait checks for signals this often (50 ms) */

static Job *abandoned_jobs;        /* the abandoned executions not reaped yet (GIL) */
static Py_ssize_t abandoned_count; /* their number (GIL) */
static int reaping;                /* reap_finished is running (GIL): a nested call (from a destructor) waits */
static unsigned long main_thread_ident;

static void release_job(Job *job)
{
    if (__atomic_sub_fetch(&job->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    sem_destroy(&job->done);
    free(job);
}

static void run_job(Job *job)
{
    job->error = job->execute(&job->call);
    __atomic_store_n(&job->finished, 1, __ATOMIC_RELEASE);
    sem_post(&job->done);
    release_job(job);
}

/* The kept helper thread: 0 not started, 1 idle, 2 running a job. Only the main thread (holding the GIL) hands it
 * jobs, so only the helper makes it idle and only the main thread makes it busy. */
static int helper_state;
static sem_t helper_go;
static Job *helper_job;

static void *helper_main(void *unused)
{
    for (;;) {
        while (sem_wait(&helper_go) < 0)
            ; /* (EINTR) */
        Job *job = __atomic_load_n(&helper_job, __ATOMIC_ACQUIRE);
        job->error = job->execute(&job->call);
        __atomic_store_n(&helper_state, 1, __ATOMIC_RELEASE); /* idle before the waiter wakes: its next call finds it */
        __atomic_store_n(&job->finished, 1, __ATOMIC_RELEASE);
        sem_post(&job->done);
        release_job(job);
    }
    return NULL;
}

static void *one_job_main(void *job)
{
    run_job((Job *)job);
    return NULL;
}

/* A detached thread running start(arg) with every signal blocked (they go to the main thread): 0, or -1. */
static int start_thread(void *(*start)(void *), void *arg)
{
    pthread_attr_t attr;
    sigset_t all, old;
    pthread_t thread;
    if (pthread_attr_init(&attr) != 0)
        return -1;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int failed = pthread_create(&thread, &attr, start, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    return failed ? -1 : 0;
}

/* Start job on a helper thread: 0, or -1 (no thread could be started; nothing is set). */
static int start_job(Job *job)
{
    int state = __atomic_load_n(&helper_state, __ATOMIC_ACQUIRE);
    if (state == 0) {
        if (sem_init(&helper_go, 0, 0) < 0)
            return -1;
        __atomic_store_n(&helper_state, 1, __ATOMIC_RELEASE);
        if (start_thread(helper_main, NULL) < 0) {
            __atomic_store_n(&helper_state, 0, __ATOMIC_RELEASE);
            sem_destroy(&helper_go);
            return -1;
        }
        state = 1;
    }
    if (state == 1) {
        __atomic_store_n(&helper_state, 2, __ATOMIC_RELEASE);
        __atomic_store_n(&helper_job, job, __ATOMIC_RELEASE);
        sem_post(&helper_go);
        return 0;
    }
    return start_thread(one_job_main, job); /* (the kept helper runs an abandoned execution) */
}

/* In a forked child the helper thread is gone (and ember computes nothing there): start afresh. */
static void helpers_after_fork(void)
{
    helper_state = 0;
    abandoned_jobs = NULL;
    abandoned_count = 0;
    reaping = 0;
}

/* Wait (the GIL released, in steps of WAIT_STEP_NS running the signal handlers between them) until sem is posted:
 * 0; or -1 with the exception of a signal handler set (a no-op on threads other than the main one). */
static int wait_interruptibly(sem_t *sem)
{
    for (;;) {
        int waited;
        Py_BEGIN_ALLOW_THREADS
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_nsec += WAIT_STEP_NS;
        if (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_sec += 1;
            deadline.tv_nsec -= 1000000000L;
        }
        waited = sem_timedwait(sem, &deadline);
        Py_END_ALLOW_THREADS
        if (waited == 0)
            return 0;
        if (PyErr_CheckSignals() < 0)
            return -1;
    }
}

/* Wait until job is done: 0; or -1 with the exception of a signal handler set. */
static int wait_for_job(Job *job)
{
    return wait_interruptibly(&job->done);
}

/* Destroy a PJRT error nobody raises (keeping the error being raised). */
static void drop_pjrt_error(ApiObject *api, const char *name, PJRT_Error *error)
{
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    raise_pjrt_error(api, name, error);
    PyErr_Clear();
    PyErr_Restore(type, value, traceback);
}

static int unpin_many(PyObject *const *buffers, Py_ssize_t n, PyObject **doomed);

/* The end of an abandoned execution that has finished (GIL held): unpin its buffers (destroying those deleted
 * meanwhile), destroy its outputs (or its error), unpin its client, let go of what it held. */
static void finish_abandoned(Job *job)
{
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    ApiObject *api = job->runner->api;
    if (unpin_many(job->buffers, job->n, job->doomed) < 0)
        PyErr_Clear();
    if (job->error != NULL)
        drop_pjrt_error(api, "LoadedExecutable_Execute", job->error);
    else {
        for (Py_ssize_t k = 0; k < job->runner->num_outputs; k++)
            destroy_unowned(api, job->outputs[k]);
    }
    unpin_client(api);
    for (Py_ssize_t i = 0; i < job->n; i++)
        Py_DECREF(job->buffers[i]);
    free(job->buffers);
    free(job->doomed);
    Py_XDECREF(job->owner);
    Py_DECREF(job->runner);
    abandoned_count--;
    PyErr_Restore(type, value, traceback);
    release_job(job);
}

/* Reap the abandoned executions that have ended (GIL held): how many are still running. */
static Py_ssize_t reap_finished(void)
{
    if (abandoned_jobs == NULL || reaping)
        return abandoned_count;
    reaping = 1;
    Job *ended = NULL, **link = &abandoned_jobs;
    while (*link != NULL) { /* (unlinked first: finishing one may run Python code) */
        Job *job = *link;
        if (__atomic_load_n(&job->finished, __ATOMIC_ACQUIRE)) {
            *link = job->next;
            job->next = ended;
            ended = job;
        } else {
            link = &job->next;
        }
    }
    while (ended != NULL) {
        Job *job = ended;
        ended = job->next;
        finish_abandoned(job);
    }
    reaping = 0;
    return abandoned_count;
}

static PyObject *fp_reap_executions(PyObject *module, PyObject *unused)
{
    return PyLong_FromSsize_t(reap_finished());
}

/* Keep a running job for the reaper (GIL held): it holds the runner, its Executable and the pinned buffers. 0, or
 * -1 when that memory is not to be had (nothing changed). */
static int abandon(Job *job, RunnerObject *runner, PyObject *const *buffers, Py_ssize_t n)
{
    job->buffers = malloc((n ? n : 1) * sizeof(PyObject *));
    job->doomed = calloc(n ? n : 1, sizeof(PyObject *));
    if (job->buffers == NULL || job->doomed == NULL) {
        free(job->buffers);
        free(job->doomed);
        job->buffers = job->doomed = NULL;
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        job->buffers[i] = Py_NewRef(buffers[i]);
    job->n = n;
    job->runner = (RunnerObject *)Py_NewRef(runner);
    job->owner = runner->owner != NULL ? PyWeakref_GetObject(runner->owner) : NULL;
    Py_XINCREF(job->owner); /* (Py_None when it is gone: then its caller held nothing to lose) */
    job->next = abandoned_jobs;
    abandoned_jobs = job;
    abandoned_count++;
    return 0;
}

/* Execute call on a helper thread, waiting interruptibly (see above); the buffers are pinned. RUN_OK (the outputs
 * in outputs, the call's error in *error), RUN_ABANDONED (a signal handler raised; the execution is kept for the
 * reaper), RUN_ERROR (a signal handler raised after the execution ended: its outputs are destroyed, the buffers
 * still pinned), or RUN_NOT_PINNED when no helper could be used (the caller executes directly). */
static int execute_on_helper(RunnerObject *self, const ExecuteArgs *call, PyObject *const *buffers, Py_ssize_t n,
                             void **outputs, PJRT_Error **error)
{
    Py_ssize_t k = self->num_outputs;
    Job *job = calloc(1, sizeof(Job) + (size_t)(n + k + 1) * sizeof(void *));
    if (job == NULL)
        return RUN_NOT_PINNED;
    if (sem_init(&job->done, 0, 0) < 0) {
        free(job);
        return RUN_NOT_PINNED;
    }
    job->handles = (void **)(job + 1);
    job->outputs = job->handles + n;
    memcpy(job->handles, call->argument_lists[0], (size_t)n * sizeof(void *));
    job->options = *call->options;
    job->call = *call;
    job->call.options = &job->options;
    job->argument_lists[0] = job->handles;
    job->output_lists[0] = job->outputs;
    job->call.argument_lists = job->argument_lists;
    job->call.output_lists = job->output_lists;
    job->execute = self->api->execute;
    job->refs = 2;
    if (start_job(job) < 0) {
        sem_destroy(&job->done);
        free(job);
        return RUN_NOT_PINNED;
    }
    int interrupted = wait_for_job(job) < 0;
    if (interrupted && !__atomic_load_n(&job->finished, __ATOMIC_ACQUIRE)) {
        if (abandon(job, self, buffers, n) == 0)
            return RUN_ABANDONED; /* (the reaper releases the waiter's reference) */
        PyObject *type, *value, *traceback; /* no memory to abandon it: wait for its end */
        PyErr_Fetch(&type, &value, &traceback);
        Py_BEGIN_ALLOW_THREADS
        while (sem_wait(&job->done) < 0)
            ;
        Py_END_ALLOW_THREADS
        PyErr_Restore(type, value, traceback);
    }
    *error = job->error;
    memcpy(outputs, job->outputs, (size_t)k * sizeof(void *));
    release_job(job);
    if (!interrupted)
        return RUN_OK;
    if (*error != NULL)
        drop_pjrt_error(self->api, "LoadedExecutable_Execute", *error);
    else {
        for (Py_ssize_t i = 0; i < k; i++)
            destroy_unowned(self->api, outputs[i]);
    }
    return RUN_ERROR;
}

/* run_buffers' work once the client is pinned. */
static int run_pinned(RunnerObject *self, PyObject *const *buffers, Py_ssize_t n, void *execute_device,
                      Scratch *s)
{
    /* ATOMIC: pin them all, or none. */
    Py_ssize_t i;
    for (i = 0; i < n; i++) {
        if ((s->handles[i] = pin_one(buffers[i], self->client)) == NULL)
            break;
    }
    if (i < n) {
        int failed = PyErr_Occurred() != NULL;
        for (Py_ssize_t j = 0; j < i; j++) {
            PyObject *doomed;
            (void)unpin_one(buffers[j], &doomed); /* nothing ran since the pin: no buffer can be doomed */
            assert(doomed == NULL);
        }
        return failed ? RUN_ERROR : RUN_NOT_PINNED;
    }

    ExecuteOptions options;
    memset(&options, 0, sizeof options);
    options.struct_size = sizeof options;
    void *const *argument_lists[1] = {s->handles};
    void **output_lists[1] = {s->outputs};
    ExecuteArgs call = {sizeof(ExecuteArgs), NULL, self->executable, &options, argument_lists, 1, (size_t)n,
                        output_lists, NULL, execute_device};
    pjrt_fn execute = self->api->execute;
    PJRT_Error *error = NULL;
    int status = RUN_NOT_PINNED;
    if (self->interruptible && PyThread_get_thread_ident() == main_thread_ident)
        status = execute_on_helper(self, &call, buffers, n, s->outputs, &error);
    if (status == RUN_ABANDONED)
        return RUN_ABANDONED; /* (the buffers stay pinned until the execution is reaped) */
    if (status == RUN_NOT_PINNED) { /* (direct) */
        Py_BEGIN_ALLOW_THREADS
        error = execute(&call);
        Py_END_ALLOW_THREADS
    }
    if (status == RUN_ERROR) { /* interrupted after the execution ended (its outputs destroyed): unpin, raise */
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        if (unpin_many(buffers, n, s->doomed) < 0)
            PyErr_Clear();
        PyErr_Restore(type, value, traceback);
        return RUN_ERROR;
    }

    /* ATOMIC inside unpin_many; then the doomed buffers are destroyed (Python code). */
    if (unpin_many(buffers, n, s->doomed) < 0) {
        if (error != NULL) {
            PyObject *type, *value, *traceback;
            PyErr_Fetch(&type, &value, &traceback);
            raise_pjrt_error(self->api, "LoadedExecutable_Execute", error); /* frees it */
            PyErr_Clear();
            PyErr_Restore(type, value, traceback);
        } else {
            for (Py_ssize_t k = 0; k < self->num_outputs; k++)
                destroy_unowned(self->api, s->outputs[k]);
        }
        return RUN_ERROR;
    }
    if (error != NULL)
        return raise_pjrt_error(self->api, "LoadedExecutable_Execute", error);
    return RUN_OK;
}

/* Pin buffers[0..n) (Buffers of exactly buffer_type, strong references held by the caller), run, unpin.
 * RUN_OK: outputs[0..num_outputs) hold new PJRT buffers the caller owns. RUN_NOT_PINNED: a buffer was deleted
 * or is of another client, or the client is closed; nothing ran. RUN_ERROR: an error is set. The client is
 * pinned throughout (see pin_client). */
static int run_buffers(RunnerObject *self, PyObject *const *buffers, Py_ssize_t n, void *execute_device,
                       Scratch *s)
{
    ApiObject *api = self->api;
    if (abandoned_jobs != NULL)
        reap_finished();
    if (pin_client(api, self->client) == NULL) /* (ATOMIC, and so is the pinning of the buffers that follows) */
        return PyErr_Occurred() ? RUN_ERROR : RUN_NOT_PINNED;
    int status = run_pinned(self, buffers, n, execute_device, s);
    if (status == RUN_ABANDONED)
        return RUN_ERROR; /* (the client stays pinned until the execution is reaped) */
    unpin_client(api);
    return status;
}

/* A new Buffer(client, device, handle, shape, dtype) made without running Python code (its __init__ is not
 * called: every slot is set here, as __init__ sets it). On failure the handle is not owned by anything: the
 * caller destroys it. */
static PyObject *new_buffer(PyObject *client, PyObject *device, void *handle, PyObject *shape, PyObject *dtype)
{
    PyObject *handle_int = PyLong_FromVoidPtr(handle);
    PyObject *zero = PyLong_FromLong(0);
    PyObject *buffer = (handle_int && zero) ? buffer_type->tp_alloc(buffer_type, 0) : NULL;
    if (buffer == NULL) {
        Py_XDECREF(handle_int);
        Py_XDECREF(zero);
        return NULL;
    }
    /* (tp_alloc zeroed the slots; a collection it started saw them NULL, which traversal allows) */
    SLOT(buffer, b_client) = Py_NewRef(client);
    SLOT(buffer, b_device) = Py_NewRef(device);
    SLOT(buffer, b_handle) = handle_int;
    SLOT(buffer, b_shape) = Py_NewRef(shape);
    SLOT(buffer, b_dtype) = Py_NewRef(dtype);
    SLOT(buffer, b_pins) = zero;
    SLOT(buffer, b_doomed) = Py_NewRef(Py_None);
    return buffer;
}

/* A new Array of a Buffer (reference stolen, also on failure), an aval, the name of the program that computes
 * it (origin) and whether it is committed to its device (an input of the computation was), as Array._from_buffer
 * makes it. */
static PyObject *new_array(PyObject *buffer, PyObject *aval, PyObject *origin, int committed)
{
    PyObject *array = array_type->tp_alloc(array_type, 0);
    if (array == NULL) {
        Py_DECREF(buffer);
        return NULL;
    }
    SLOT(array, a_buffer) = buffer;
    SLOT(array, a_aval) = Py_NewRef(aval);
    SLOT(array, a_host) = Py_NewRef(Py_None);
    SLOT(array, a_origin) = Py_NewRef(origin);
    SLOT(array, a_committed) = Py_NewRef(committed ? Py_True : Py_False);
    return array;
}

/* The outputs as a list of Buffers (avals NULL) or Arrays (computed by the program named origin, committed to
 * device or not); the PJRT buffers not yet owned by a Buffer when a failure happens are destroyed. shapes, dtypes,
 * avals: tuples of num_outputs items. */
static PyObject *wrap_outputs(RunnerObject *self, PyObject *device, void **outputs, PyObject *shapes,
                              PyObject *dtypes, PyObject *avals, PyObject *origin, int committed)
{
    Py_ssize_t n = self->num_outputs, i = 0, owned = 0; /* outputs[0..owned) belong to Buffers */
    PyObject *list = PyList_New(n);
    for (; list != NULL && i < n; i++) {
        PyObject *item = new_buffer(self->client, device, outputs[i], PyTuple_GET_ITEM(shapes, i),
                                    PyTuple_GET_ITEM(dtypes, i));
        if (item == NULL)
            break;
        owned = i + 1;
        if (avals != NULL && (item = new_array(item, PyTuple_GET_ITEM(avals, i), origin, committed)) == NULL)
            break;
        PyList_SET_ITEM(list, i, item);
    }
    if (list == NULL || i < n) {
        for (Py_ssize_t j = owned; j < n; j++)
            destroy_unowned(self->api, outputs[j]);
        Py_XDECREF(list); /* the Buffers made so far destroy their handles when finalized */
        return NULL;
    }
    return list;
}

/* Runner.run(buffers, specs, device, execute_device) -> the outputs as Buffers on device, or None when an
 * argument is not a live Buffer of this client or the client is closed (nothing ran; the caller finds why).
 * specs: num_outputs (shape tuple, numpy dtype) pairs; execute_device: a PJRT_Device address or None. */
static PyObject *runner_run(RunnerObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4)
        return PyErr_Format(PyExc_TypeError, "Runner.run takes 4 arguments (%zd given)", nargs);
    if (!ready())
        return NULL;
    void *execute_device = NULL;
    if (args[3] != Py_None && (execute_device = PyLong_AsVoidPtr(args[3])) == NULL && PyErr_Occurred())
        return NULL;
    PyObject *device = args[2];
    PyObject *buffers = PySequence_Tuple(args[0]); /* a tuple: Python code runs below, a list could change */
    if (buffers == NULL)
        return NULL;
    Py_ssize_t n = PyTuple_GET_SIZE(buffers), k = self->num_outputs;
    PyObject *shapes = PyTuple_New(k), *dtypes = PyTuple_New(k), *result = NULL, *specs = NULL;
    if (shapes == NULL || dtypes == NULL)
        goto done;
    specs = PySequence_Tuple(args[1]);
    if (specs == NULL)
        goto done;
    if (PyTuple_GET_SIZE(specs) != k) {
        PyErr_Format(PyExc_ValueError, "Runner.run: %zd output specs for %zd outputs", PyTuple_GET_SIZE(specs), k);
        goto done;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *spec = PyTuple_GET_ITEM(specs, i);
        if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 2 || !PyTuple_Check(PyTuple_GET_ITEM(spec, 0))) {
            PyErr_SetString(PyExc_TypeError, "Runner.run: an output spec must be a (shape tuple, dtype) pair");
            goto done;
        }
        PyTuple_SET_ITEM(shapes, i, Py_NewRef(PyTuple_GET_ITEM(spec, 0)));
        PyTuple_SET_ITEM(dtypes, i, Py_NewRef(PyTuple_GET_ITEM(spec, 1)));
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!Py_IS_TYPE(PyTuple_GET_ITEM(buffers, i), buffer_type)) {
            result = Py_NewRef(Py_None);
            goto done;
        }
    }
    Scratch s;
    if (scratch_init(&s, n, k) < 0)
        goto done;
    int status = run_buffers(self, &PyTuple_GET_ITEM(buffers, 0), n, execute_device, &s);
    if (status == RUN_OK)
        result = wrap_outputs(self, device, s.outputs, shapes, dtypes, NULL, NULL, 0);
    else if (status == RUN_NOT_PINNED)
        result = Py_NewRef(Py_None);
    scratch_free(&s);
done:
    Py_XDECREF(specs);
    Py_XDECREF(shapes);
    Py_XDECREF(dtypes);
    Py_DECREF(buffers);
    return result;
}

static PyMethodDef runner_methods[] = {
    {"run", (PyCFunction)(void (*)(void))runner_run, METH_FASTCALL,
     "run(buffers, specs, device, execute_device) -> list of Buffers, or None when an argument cannot be used"},
    {NULL},
};

static PyMemberDef runner_members[] = {
    {"client", T_OBJECT, offsetof(RunnerObject, client), READONLY, NULL},
    {"num_outputs", T_PYSSIZET, offsetof(RunnerObject, num_outputs), READONLY, NULL},
    {"interruptible", T_BOOL, offsetof(RunnerObject, interruptible), 0,
     "Whether a call on the main thread executes on a helper thread, so that Ctrl-C interrupts it at once."},
    {NULL},
};

static PyTypeObject RunnerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ember._runtime._fastpath.Runner",
    .tp_basicsize = sizeof(RunnerObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Runner(client, handle, num_outputs): runs a loaded PJRT executable on Buffers.",
    .tp_new = runner_new,
    .tp_dealloc = (destructor)runner_dealloc,
    .tp_traverse = (traverseproc)runner_traverse,
    .tp_clear = (inquiry)runner_clear,
    .tp_methods = runner_methods,
    .tp_members = runner_members,
};

/* ---------------------------------------------------------------------------------------------------------
 * Caller: a Compiled program's call in the common case: every argument exactly an Array on the program's
 * device with the expected shape and dtype, the constants placed there, debug checks off. Anything else
 * returns None, and Compiled's Python path handles it (with its error messages). The results are committed to
 * the device when an argument is (the arguments are all on it: none moves).
 */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    RunnerObject *runner;
    PyObject *executable; /* the Executable: keeps the PJRT executable alive */
    PyObject *device;
    PyObject *in_avals;   /* tuple */
    PyObject **seen;      /* per argument: the last aval object found equal to the expected one, or NULL */
    PyObject *out_avals;  /* tuple */
    PyObject *out_shapes; /* tuple */
    PyObject *out_dtypes; /* tuple */
    PyObject *consts;     /* tuple of Buffers on device, or None until Compiled sets them */
    int no_args_ok;       /* a call without arguments runs on this device */
    PyObject *host_types; /* per argument: the PJRT type an exact numpy array argument is uploaded as, or None */
    PyObject *in_shapes;  /* tuple */
    PyObject *in_dtypes;  /* tuple */
    void *device_handle;
    PyObject *name;       /* the program's name: the origin of the Arrays it returns (out-of-memory messages) */
} CallerObject;

static int caller_traverse(CallerObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->runner);
    Py_VISIT(self->executable);
    Py_VISIT(self->device);
    Py_VISIT(self->in_avals);
    Py_VISIT(self->out_avals);
    Py_VISIT(self->out_shapes);
    Py_VISIT(self->out_dtypes);
    Py_VISIT(self->consts);
    Py_VISIT(self->host_types);
    Py_VISIT(self->in_shapes);
    Py_VISIT(self->in_dtypes);
    Py_VISIT(self->name);
    if (self->seen != NULL && self->in_avals != NULL) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(self->in_avals); i++)
            Py_VISIT(self->seen[i]);
    }
    return 0;
}

static int caller_clear(CallerObject *self)
{
    if (self->seen != NULL && self->in_avals != NULL) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(self->in_avals); i++)
            Py_CLEAR(self->seen[i]);
    }
    Py_CLEAR(self->runner);
    Py_CLEAR(self->executable);
    Py_CLEAR(self->device);
    Py_CLEAR(self->in_avals);
    Py_CLEAR(self->out_avals);
    Py_CLEAR(self->out_shapes);
    Py_CLEAR(self->out_dtypes);
    Py_CLEAR(self->consts);
    Py_CLEAR(self->host_types);
    Py_CLEAR(self->in_shapes);
    Py_CLEAR(self->in_dtypes);
    Py_CLEAR(self->name);
    return 0;
}

static void caller_dealloc(CallerObject *self)
{
    PyObject_GC_UnTrack(self);
    caller_clear(self);
    PyMem_Free(self->seen);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *caller_vectorcall(CallerObject *self, PyObject *const *argv, size_t nargsf, PyObject *kwnames);

/* Caller(runner, executable, device, in_avals, out_avals, no_args_ok, host_types=None, name=None) */
static PyObject *caller_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    PyObject *runner, *executable, *device, *in_avals, *out_avals, *host_types = Py_None, *name = Py_None;
    int no_args_ok;
    static char *names[] = {"runner", "executable", "device", "in_avals", "out_avals", "no_args_ok", "host_types",
                            "name", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!OOOOp|OO:Caller", names, &RunnerType, &runner, &executable,
                                     &device, &in_avals, &out_avals, &no_args_ok, &host_types, &name))
        return NULL;
    CallerObject *self = (CallerObject *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    self->vectorcall = (vectorcallfunc)caller_vectorcall;
    self->runner = (RunnerObject *)Py_NewRef(runner);
    self->executable = Py_NewRef(executable);
    self->device = Py_NewRef(device);
    self->consts = Py_NewRef(Py_None);
    self->no_args_ok = no_args_ok;
    self->name = Py_NewRef(name);
    self->in_avals = PySequence_Tuple(in_avals);
    self->out_avals = PySequence_Tuple(out_avals);
    self->host_types = Py_NewRef(Py_None);
    if (self->in_avals == NULL || self->out_avals == NULL)
        goto fail;
    Py_ssize_t n = PyTuple_GET_SIZE(self->in_avals), k = PyTuple_GET_SIZE(self->out_avals);
    if (host_types != Py_None) {
        /* numpy arguments are uploaded here: the types, each input's shape and dtype, the device's handle */
        Py_SETREF(self->host_types, PySequence_Tuple(host_types));
        if (self->host_types == NULL || (self->in_shapes = PyTuple_New(n)) == NULL ||
            (self->in_dtypes = PyTuple_New(n)) == NULL)
            goto fail;
        if (PyTuple_GET_SIZE(self->host_types) != n) {
            PyErr_SetString(PyExc_ValueError, "Caller: one host type per argument");
            goto fail;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *aval = PyTuple_GET_ITEM(self->in_avals, i), *value;
            if ((value = PyObject_GetAttr(aval, str_shape)) == NULL || !PyTuple_Check(value)) {
                Py_XDECREF(value);
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "Caller: an aval's shape must be a tuple");
                goto fail;
            }
            PyTuple_SET_ITEM(self->in_shapes, i, value);
            if ((value = PyObject_GetAttr(aval, str_dtype)) == NULL)
                goto fail;
            PyTuple_SET_ITEM(self->in_dtypes, i, value);
        }
        PyObject *handle = PyObject_GetAttr(device, str_handle);
        self->device_handle = handle ? PyLong_AsVoidPtr(handle) : NULL;
        Py_XDECREF(handle);
        if (PyErr_Occurred())
            goto fail;
    }
    if (k != self->runner->num_outputs) {
        PyErr_Format(PyExc_ValueError, "Caller: %zd output avals for an executable with %zd outputs", k,
                     self->runner->num_outputs);
        goto fail;
    }
    self->seen = PyMem_Calloc(n ? n : 1, sizeof(PyObject *));
    self->out_shapes = PyTuple_New(k);
    self->out_dtypes = PyTuple_New(k);
    if (self->seen == NULL || self->out_shapes == NULL || self->out_dtypes == NULL) {
        if (self->seen == NULL)
            PyErr_NoMemory();
        goto fail;
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        PyObject *aval = PyTuple_GET_ITEM(self->out_avals, i);
        PyObject *shape = PyObject_GetAttr(aval, str_shape);
        if (shape == NULL)
            goto fail;
        PyTuple_SET_ITEM(self->out_shapes, i, shape);
        PyObject *dtype = PyObject_GetAttr(aval, str_dtype);
        if (dtype == NULL)
            goto fail;
        PyTuple_SET_ITEM(self->out_dtypes, i, dtype);
    }
    return (PyObject *)self;
fail:
    Py_DECREF(self);
    return NULL;
}

/* Whether aval has the shape and dtype of expected (the weak type is not compared, as in Compiled's check):
 * 1, 0, or -1 with an error. */
static int same_shape_and_dtype(PyObject *aval, PyObject *expected)
{
    int result = -1;
    PyObject *a = PyObject_GetAttr(aval, str_shape), *b = a ? PyObject_GetAttr(expected, str_shape) : NULL;
    if (b != NULL)
        result = PyObject_RichCompareBool(a, b, Py_EQ);
    Py_XDECREF(a);
    Py_XDECREF(b);
    if (result != 1)
        return result;
    a = PyObject_GetAttr(aval, str_dtype);
    b = a ? PyObject_GetAttr(expected, str_dtype) : NULL;
    result = b ? PyObject_RichCompareBool(a, b, Py_EQ) : -1;
    Py_XDECREF(a);
    Py_XDECREF(b);
    return result;
}

/* Argument i, an exact numpy array: a new Buffer on the Caller's device holding a copy (*buffer), when its dtype
 * and shape are the expected ones and numpy exports it C-contiguous (standard dtypes); else *buffer stays NULL
 * and the Python path takes the call. 0, or -1 with an error set (a PJRT error). Runs Python code (attribute
 * reads, comparisons) and releases the GIL during the copy. */
static int upload_argument(CallerObject *self, PyObject *x, Py_ssize_t i, PyObject **buffer)
{
    PyObject *expected_dtype = PyTuple_GET_ITEM(self->in_dtypes, i);
    PyObject *expected_shape = PyTuple_GET_ITEM(self->in_shapes, i);
    PyObject *dtype = PyObject_GetAttr(x, str_dtype);
    if (dtype == NULL)
        return -1;
    int same = dtype == expected_dtype ? 1 : PyObject_RichCompareBool(dtype, expected_dtype, Py_EQ);
    Py_DECREF(dtype);
    if (same != 1)
        return same;
    PyObject *shape = PyObject_GetAttr(x, str_shape);
    if (shape == NULL)
        return -1;
    same = PyObject_RichCompareBool(shape, expected_shape, Py_EQ);
    Py_DECREF(shape);
    if (same != 1)
        return same;
    Py_ssize_t ndim = PyTuple_GET_SIZE(expected_shape);
    int64_t dims[MAX_DIMS];
    if (ndim > MAX_DIMS)
        return 0;
    if (read_dims(expected_shape, dims) < 0)
        return -1;
    int type = (int)PyLong_AsLong(PyTuple_GET_ITEM(self->host_types, i));
    if (type == -1 && PyErr_Occurred())
        return -1;
    ApiObject *api = self->runner->api;
    if (api->from_host == NULL || api->event_await == NULL || api->event_destroy == NULL)
        return 0;
    Py_buffer view;
    if (PyObject_GetBuffer(x, &view, PyBUF_C_CONTIGUOUS) < 0) { /* not contiguous, or a dtype numpy cannot export */
        PyErr_Clear();
        return 0;
    }
    void *client_handle = pin_client(api, self->runner->client);
    if (client_handle == NULL) {
        PyBuffer_Release(&view);
        return PyErr_Occurred() ? -1 : 0;
    }
    int status = 0;
    void *handle = upload(api, client_handle, self->device_handle, view.buf, type, dims, ndim);
    unpin_client(api);
    PyBuffer_Release(&view);
    if (handle == NULL)
        return -1;
    *buffer = new_buffer(self->runner->client, self->device, handle, expected_shape, expected_dtype);
    if (*buffer == NULL) {
        destroy_unowned(api, handle);
        status = -1;
    }
    return status;
}

static PyObject *caller_vectorcall(CallerObject *self, PyObject *const *argv, size_t nargsf, PyObject *kwnames)
{
    if (PyVectorcall_NARGS(nargsf) != 1 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0))
        return PyErr_Format(PyExc_TypeError, "Caller takes one argument: the sequence of arguments");
    if (checks_active || !ready())
        return checks_active ? Py_NewRef(Py_None) : NULL;
    PyObject *args = argv[0];
    if (PyTuple_CheckExact(args))
        Py_INCREF(args);
    else if (PyList_CheckExact(args))
        args = PyList_AsTuple(args); /* Python code can run below (comparisons): a list could change */
    else
        return Py_NewRef(Py_None);
    if (args == NULL)
        return NULL;

    PyObject *result = Py_None; /* (borrowed until the end) */
    PyObject *consts = Py_NewRef(self->consts); /* another thread may set consts meanwhile */
    Py_ssize_t n = PyTuple_GET_SIZE(args), n_in = PyTuple_GET_SIZE(self->in_avals);
    if (n != n_in || !PyTuple_CheckExact(consts) || (n == 0 && !self->no_args_ok)) {
        Py_DECREF(consts);
        Py_DECREF(args);
        return Py_NewRef(Py_None);
    }
    Py_ssize_t nc = PyTuple_GET_SIZE(consts), total = nc + n, taken = 0;
    Scratch s;
    if (scratch_init(&s, total, self->runner->num_outputs) < 0) {
        Py_DECREF(consts);
        Py_DECREF(args);
        return NULL;
    }
    /* The buffers, constants first, as strong references: they stay alive until unpinned. */
    for (Py_ssize_t i = 0; i < nc; i++) {
        PyObject *buffer = PyTuple_GET_ITEM(consts, i);
        if (!Py_IS_TYPE(buffer, buffer_type))
            goto done;
        s.buffers[taken++] = Py_NewRef(buffer);
    }
    int arrays = 0; /* whether an argument is an Array (else the call runs on this device only if no_args_ok) */
    int committed = 0; /* whether an argument is committed to this device: then the results are too */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyTuple_GET_ITEM(args, i);
        if (!Py_IS_TYPE(x, array_type)) {
            PyObject *buffer = NULL;
            if (ndarray_type != NULL && Py_IS_TYPE(x, ndarray_type) && self->host_types != Py_None &&
                PyTuple_GET_ITEM(self->host_types, i) != Py_None) {
                if (upload_argument(self, x, i, &buffer) < 0)
                    result = NULL;
            }
            if (buffer == NULL)
                goto done;
            s.buffers[taken++] = buffer; /* (owned: a new Buffer, freed after the call) */
            continue;
        }
        arrays = 1;
        PyObject *buffer = SLOT(x, a_buffer), *aval = SLOT(x, a_aval);
        committed |= SLOT(x, a_committed) == Py_True;
        if (buffer == NULL || aval == NULL || !Py_IS_TYPE(buffer, buffer_type) ||
            SLOT(buffer, b_device) != self->device)
            goto done;
        s.buffers[taken++] = Py_NewRef(buffer);
        PyObject *expected = PyTuple_GET_ITEM(self->in_avals, i);
        if (aval != expected && aval != self->seen[i]) {
            Py_INCREF(aval); /* (held across the comparison, which could in principle run Python code) */
            int same = same_shape_and_dtype(aval, expected);
            if (same == 1)
                Py_XSETREF(self->seen[i], aval); /* (reference moved) */
            else
                Py_DECREF(aval);
            if (same != 1) {
                if (same < 0)
                    result = NULL;
                goto done;
            }
        }
    }
    if (!arrays && !self->no_args_ok)
        goto done; /* (host values only: the call runs on the default device, which is not this one) */
    int status = run_buffers(self->runner, s.buffers, total, NULL, &s);
    if (status == RUN_OK)
        result = wrap_outputs(self->runner, self->device, s.outputs, self->out_shapes, self->out_dtypes,
                              self->out_avals, self->name, committed);
    else if (status == RUN_ERROR)
        result = NULL;
    /* RUN_NOT_PINNED: None, the Python path finds the deleted argument and raises its error */
done:
    if (result == Py_None)
        Py_INCREF(result);
    for (Py_ssize_t i = 0; i < taken; i++)
        Py_DECREF(s.buffers[i]);
    scratch_free(&s);
    Py_DECREF(consts);
    Py_DECREF(args);
    return result;
}

static PyObject *caller_get_consts(CallerObject *self, void *closure)
{
    return Py_NewRef(self->consts);
}

static int caller_set_consts(CallerObject *self, PyObject *value, void *closure)
{
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "Caller.consts cannot be deleted");
        return -1;
    }
    if (value != Py_None && !PyTuple_CheckExact(value)) {
        PyErr_SetString(PyExc_TypeError, "Caller.consts must be a tuple of Buffers or None");
        return -1;
    }
    Py_SETREF(self->consts, Py_NewRef(value));
    return 0;
}

static PyGetSetDef caller_getset[] = {
    {"consts", (getter)caller_get_consts, (setter)caller_set_consts,
     "The program's constants as Buffers on its device (a tuple), or None: calls return None until set.", NULL},
    {NULL},
};

static PyMemberDef caller_members[] = {
    {"runner", T_OBJECT, offsetof(CallerObject, runner), READONLY, NULL},
    {"device", T_OBJECT, offsetof(CallerObject, device), READONLY, NULL},
    {"in_avals", T_OBJECT, offsetof(CallerObject, in_avals), READONLY, NULL},
    {"out_avals", T_OBJECT, offsetof(CallerObject, out_avals), READONLY, NULL},
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(CallerObject, vectorcall), READONLY, NULL},
    {NULL},
};

static PyTypeObject CallerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ember._runtime._fastpath.Caller",
    .tp_basicsize = sizeof(CallerObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "Caller(runner, executable, device, in_avals, out_avals, no_args_ok, host_types=None, name=None): "
              "caller(args) runs a "
              "compiled program on Arrays and returns its outputs as a list of Arrays, or None when the call "
              "is not the common case.",
    .tp_new = caller_new,
    .tp_dealloc = (destructor)caller_dealloc,
    .tp_traverse = (traverseproc)caller_traverse,
    .tp_clear = (inquiry)caller_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(CallerObject, vectorcall),
    .tp_getset = caller_getset,
    .tp_members = caller_members,
};

/* ---------------------------------------------------------------------------------------------------------
 * block_until_ready and the Buffer finalizer.
 */

static void destroy_event(ApiObject *api, void *event)
{
    HandleArgs args = {sizeof(HandleArgs), NULL, event};
    PJRT_Error *error = api->event_destroy(&args);
    if (error != NULL) { /* destroyed, not raised: the awaited result matters */
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        raise_pjrt_error(api, "Event_Destroy", error);
        PyErr_Clear();
        PyErr_Restore(type, value, traceback);
    }
}

static int await_event(ApiObject *api, const char *name, void *event)
{
    if (event == NULL)
        return 0;
    HandleArgs args = {sizeof(HandleArgs), NULL, event};
    PJRT_Error *error;
    Py_BEGIN_ALLOW_THREADS
    error = api->event_await(&args);
    Py_END_ALLOW_THREADS
    destroy_event(api, event);
    return error != NULL ? raise_pjrt_error(api, name, error) : 0;
}

/* An interruptible wait's state, shared by the waiting thread and the event's OnReady callback (called on a PJRT
 * thread, without the GIL): each holds a reference, and the last to let go frees it (and the event's error, when
 * the waiter did not take it). No Python object is involved: the callback may run at any time, even at exit. */
typedef struct {
    sem_t done;         /* posted by the callback */
    PJRT_Error *error;  /* the event's error (set by the callback before posting; NULL once the waiter takes it) */
    pjrt_fn error_destroy;
    int refs;           /* 2, then 1, then 0 (atomic) */
} ReadyWaiter;

static void release_waiter(ReadyWaiter *w)
{
    if (__atomic_sub_fetch(&w->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    if (w->error != NULL) {
        HandleArgs args = {sizeof(HandleArgs), NULL, w->error}; /* PJRT_Error_Destroy_Args */
        w->error_destroy(&args);
    }
    sem_destroy(&w->done);
    free(w);
}

static void on_event_ready(PJRT_Error *error, void *user_arg)
{
    ReadyWaiter *w = (ReadyWaiter *)user_arg;
    w->error = error;
    sem_post(&w->done);
    release_waiter(w);
}


/* Wait for an event that is not ready, in steps, the GIL released, running the signal handlers between steps:
 * PJRT_Event_Await would hold a Ctrl-C (KeyboardInterrupt) until the end of a program that may run for minutes.
 * 0, or -1 with an error set: the event's (as PJRT_<name>'s), or the signal handler's (the program goes on in the
 * background and the callback frees the wait's state). The caller still owns the event. */
static int await_interruptibly(ApiObject *api, const char *name, void *event)
{
    ReadyWaiter *w = (ReadyWaiter *)calloc(1, sizeof *w);
    if (w == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    if (sem_init(&w->done, 0, 0) < 0) {
        free(w);
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    w->error_destroy = api->error_destroy;
    w->refs = 2;
    OnReadyArgs args = {sizeof(OnReadyArgs), NULL, event, on_event_ready, w};
    PJRT_Error *error = api->event_on_ready(&args);
    if (error != NULL) { /* the callback will not run */
        w->refs = 1;
        release_waiter(w);
        return raise_pjrt_error(api, "Event_OnReady", error);
    }
    if (wait_interruptibly(&w->done) < 0) {
        release_waiter(w);
        return -1;
    }
    error = w->error;
    w->error = NULL;
    release_waiter(w);
    return error != NULL ? raise_pjrt_error(api, name, error) : 0;
}

/* await_event for a buffer's ready event: interruptible (see await_interruptibly) while the event is not ready,
 * where the plugin provides the functions. Nothing the event guards is freed by leaving early. */
static int await_ready_event(ApiObject *api, void *event)
{
    const char *name = "Buffer_ReadyEvent";
    if (event == NULL || api->event_is_ready == NULL || api->event_on_ready == NULL || api->error_destroy == NULL)
        return await_event(api, name, event);
    IsReadyArgs ready = {sizeof(IsReadyArgs), NULL, event, 0};
    PJRT_Error *error = api->event_is_ready(&ready);
    if (error == NULL && ready.is_ready)
        return await_event(api, name, event);
    int status = error != NULL ? raise_pjrt_error(api, "Event_IsReady", error)
                               : await_interruptibly(api, name, event);
    destroy_event(api, event);
    return status;
}

/* block_until_ready(buffer) -> True when the buffer is ready, False when it cannot be used (deleted, its client
 * closed, or the plugin lacks the functions): the caller then raises why. A PJRT error is raised. */
static PyObject *fp_block_until_ready(PyObject *module, PyObject *buffer)
{
    if (check_buffer(buffer, "block_until_ready") < 0)
        return NULL;
    ApiObject *api = open_api_of(buffer);
    if (api == NULL || api->ready_event == NULL || api->event_await == NULL || api->event_destroy == NULL) {
        Py_XDECREF(api);
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_FALSE;
    }
    Py_INCREF(buffer); /* (the caller holds it; kept explicit across the released GIL) */
    /* ATOMIC: the client and the buffer pinned together */
    void *handle = NULL;
    if (pin_client(api, SLOT(buffer, b_client)) != NULL) {
        handle = pin_one(buffer, NULL);
        if (handle == NULL)
            unpin_client(api);
    }
    if (handle == NULL) {
        Py_DECREF(buffer);
        Py_DECREF(api);
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_FALSE;
    }
    ReadyEventArgs ready_args = {sizeof(ReadyEventArgs), NULL, handle, NULL};
    PJRT_Error *error = api->ready_event(&ready_args);
    int status = error != NULL ? raise_pjrt_error(api, "Buffer_ReadyEvent", error)
                               : await_ready_event(api, ready_args.event);
    unpin_client(api);
    PyObject *doomed;
    int unpinned = unpin_one(buffer, &doomed); /* ATOMIC */
    if (unpinned == 0) {
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        unpinned = destroy_doomed(&buffer, &doomed, 1);
        if (type != NULL) { /* the PJRT error is the one reported */
            PyErr_Clear();
            PyErr_Restore(type, value, traceback);
        }
    }
    Py_DECREF(buffer);
    Py_DECREF(api);
    if (status < 0 || unpinned < 0)
        return NULL;
    Py_RETURN_TRUE;
}

/* Buffer.delete: mark it deleted and destroy it now unless pinned (then its last
 * unpin does). With raise_errors false (the finalizer) nothing is raised. */
static int delete_buffer(PyObject *buffer, int raise_errors)
{
    PyObject *handle = take_handle(buffer); /* ATOMIC */
    if (handle == NULL)
        return raise_errors ? -1 : (PyErr_Clear(), 0);
    if (handle == Py_None) {
        Py_DECREF(handle);
        return 0;
    }
    int result = 0;
    PyObject *client = SLOT(buffer, b_client);
    ApiObject *api = client ? (ApiObject *)api_of(client) : NULL;
    int open = api ? client_open(client) : -1;
    if (open > 0) {
        HandleArgs args = {sizeof(HandleArgs), NULL, PyLong_AsVoidPtr(handle)};
        PJRT_Error *error = api->buffer_destroy(&args);
        if (error != NULL)
            result = raise_pjrt_error(api, "Buffer_Destroy", error);
    } else if (open < 0) {
        result = -1;
    }
    Py_XDECREF(api);
    Py_DECREF(handle);
    if (result < 0 && !raise_errors)
        PyErr_Clear();
    return result;
}

/* Buffer.__del__ (installed by buffer.py as a method of Buffer): delete, never raising. */
static PyObject *buffer_finalize(PyObject *buffer, PyObject *unused)
{
    if (buffer_type != NULL && Py_IS_TYPE(buffer, buffer_type)) {
        PyObject *type, *value, *traceback;
        PyErr_Fetch(&type, &value, &traceback);
        (void)delete_buffer(buffer, 0);
        PyErr_Restore(type, value, traceback);
    }
    Py_RETURN_NONE;
}

static PyMethodDef buffer_finalize_def = {
    "__del__", (PyCFunction)buffer_finalize, METH_NOARGS,
    "Delete the buffer (at once, or when the PJRT calls using it end); never raises."};

/* buffer_finalizer() -> a method descriptor of the registered Buffer type, to install as Buffer.__del__. */
static PyObject *fp_buffer_finalizer(PyObject *module, PyObject *unused)
{
    if (buffer_type == NULL)
        return PyErr_Format(PyExc_RuntimeError, "buffer_finalizer: register_buffer_type first");
    return PyDescr_NewMethod(buffer_type, &buffer_finalize_def);
}

/* ---------------------------------------------------------------------------------------------------------
 * from_host: host data to a new Buffer.
 */


/* from_host(client, device, device_handle, data, pjrt_type, shape, dtype) -> a new Buffer on device holding a
 * copy of C-contiguous, native-order data of that shape and type: data is an object exporting such a buffer (a
 * numpy array of a standard dtype: it is held, and its buffer, for the call) or the address of such memory (an
 * int: the caller keeps the memory alive and unchanged during the call). None when the client is closed or its
 * plugin lacks the functions (the caller then takes its general path). A PJRT error is raised. The copy happens
 * with the GIL released. */
static PyObject *fp_from_host(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7)
        return PyErr_Format(PyExc_TypeError, "from_host takes 7 arguments (%zd given)", nargs);
    if (!ready())
        return NULL;
    PyObject *client = args[0], *device = args[1], *shape = args[5], *dtype = args[6];
    if (!PyTuple_CheckExact(shape) || PyTuple_GET_SIZE(shape) > MAX_DIMS)
        return PyErr_Format(PyExc_TypeError, "from_host: shape must be a tuple of at most %d ints", MAX_DIMS);
    int64_t dims[MAX_DIMS];
    Py_ssize_t ndim = PyTuple_GET_SIZE(shape);
    if (read_dims(shape, dims) < 0)
        return NULL;
    void *device_handle = PyLong_AsVoidPtr(args[2]);
    int type = (int)PyLong_AsLong(args[4]);
    if (PyErr_Occurred())
        return NULL;
    Py_buffer view = {0};
    const void *data;
    if (PyLong_Check(args[3])) {
        if ((data = PyLong_AsVoidPtr(args[3])) == NULL && PyErr_Occurred())
            return NULL;
    } else {
        /* Another thread could change the memory during the copy, as it could with numpy's own copies. */
        if (PyObject_GetBuffer(args[3], &view, PyBUF_C_CONTIGUOUS) < 0)
            return NULL;
        data = view.buf;
    }
    ApiObject *api = (ApiObject *)api_of(client);
    if (api == NULL) {
        PyBuffer_Release(&view);
        return NULL;
    }
    if (api->from_host == NULL || api->event_await == NULL || api->event_destroy == NULL) {
        Py_DECREF(api);
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    void *client_handle = pin_client(api, client);
    if (client_handle == NULL) { /* closed (None), or an error reading it */
        Py_DECREF(api);
        PyBuffer_Release(&view);
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }
    PyObject *result = NULL;
    void *handle = upload(api, client_handle, device_handle, data, type, dims, ndim);
    unpin_client(api);
    if (handle != NULL && (result = new_buffer(client, device, handle, shape, dtype)) == NULL)
        destroy_unowned(api, handle);
    Py_DECREF(api);
    PyBuffer_Release(&view); /* (after the await: PJRT is done with the memory) */
    return result;
}

/* ---------------------------------------------------------------------------------------------------------
 * HostMemory: a ready buffer's memory, read in place (CPU plugins, whose device memory is the host's), exported
 * through the buffer protocol as read-only bytes. It pins the buffer while it lives, so a delete() meanwhile
 * leaves the destruction to its end. The Python twin is _HostMemory in pjrt/buffer.py.
 */
typedef struct {
    PyObject_HEAD
    PyObject *buffer; /* pinned */
    void *data;
    Py_ssize_t size;
} HostMemoryObject;

static int host_memory_getbuffer(HostMemoryObject *self, Py_buffer *view, int flags)
{
    return PyBuffer_FillInfo(view, (PyObject *)self, self->data, self->size, 1, flags);
}

static void host_memory_dealloc(HostMemoryObject *self)
{
    PyObject *buffer = self->buffer;
    if (buffer != NULL) {
        PyObject *type, *value, *traceback, *doomed;
        PyErr_Fetch(&type, &value, &traceback);
        if (unpin_one(buffer, &doomed) == 0 && doomed != NULL) /* ATOMIC */
            (void)destroy_doomed(&buffer, &doomed, 1);
        PyErr_Clear();
        PyErr_Restore(type, value, traceback);
        Py_DECREF(buffer);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyBufferProcs host_memory_as_buffer = {(getbufferproc)host_memory_getbuffer, NULL};

static PyTypeObject HostMemoryType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ember._runtime._fastpath.HostMemory",
    .tp_basicsize = sizeof(HostMemoryObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A ready buffer's memory read in place (read-only bytes); pins the buffer while it lives.",
    .tp_dealloc = (destructor)host_memory_dealloc,
    .tp_as_buffer = &host_memory_as_buffer,
};

/* host_memory(buffer, nbytes) -> a HostMemory of the (ready) buffer, or None when it cannot be read in place
 * (deleted, its client closed, no UnsafePointer, a null address): the caller then copies it. */
static PyObject *fp_host_memory(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2)
        return PyErr_Format(PyExc_TypeError, "host_memory takes 2 arguments (%zd given)", nargs);
    PyObject *buffer = args[0];
    Py_ssize_t size = PyLong_AsSsize_t(args[1]);
    if ((size == -1 && PyErr_Occurred()) || check_buffer(buffer, "host_memory") < 0)
        return NULL;
    ApiObject *api = open_api_of(buffer);
    if (api == NULL || api->unsafe_pointer == NULL) {
        Py_XDECREF(api);
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }
    HostMemoryObject *memory = PyObject_New(HostMemoryObject, &HostMemoryType);
    if (memory == NULL) {
        Py_DECREF(api);
        return NULL;
    }
    memory->buffer = NULL;
    void *handle = pin_one(buffer, NULL); /* ATOMIC */
    if (handle == NULL) {
        Py_DECREF(api);
        Py_DECREF(memory);
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }
    memory->buffer = Py_NewRef(buffer); /* pinned: unpinned by the dealloc */
    UnsafePointerArgs pointer = {sizeof(UnsafePointerArgs), NULL, handle, 0};
    PJRT_Error *error = api->unsafe_pointer(&pointer);
    if (error != NULL) {
        raise_pjrt_error(api, "Buffer_UnsafePointer", error);
        Py_DECREF(api);
        Py_DECREF(memory);
        return NULL;
    }
    Py_DECREF(api);
    if (pointer.buffer_pointer == 0) {
        Py_DECREF(memory);
        Py_RETURN_NONE;
    }
    memory->data = (void *)pointer.buffer_pointer;
    memory->size = size;
    return (PyObject *)memory;
}

/* ---------------------------------------------------------------------------------------------------------
 * The module.
 */
static PyMethodDef module_methods[] = {
    {"register_buffer_type", register_buffer_type, METH_O, "Find the slots of the Buffer class (once)."},
    {"register_array_type", register_array_type, METH_O, "Find the slots of the Array class (once)."},
    {"set_checks_active", set_checks_active, METH_O, "Whether debug_nans/debug_infs checks are on."},
    {"register_ndarray_type", register_ndarray_type, METH_O, "numpy.ndarray, whose exact instances Callers upload."},
    {"pin", fp_pin, METH_O, "pin(buffer) -> its handle, or None when deleted."},
    {"unpin", fp_unpin, METH_O, "unpin(buffer): end a pin (destroying a buffer deleted meanwhile)."},
    {"take_handle", fp_take_handle, METH_O, "take_handle(buffer) -> the handle to destroy now, or None."},
    {"pin_all", (PyCFunction)(void (*)(void))fp_pin_all, METH_FASTCALL,
     "pin_all(buffers, client, handles) -> -1, or the index of the first buffer that cannot be pinned."},
    {"unpin_all", fp_unpin_all, METH_O, "unpin_all(buffers): end a pin of each."},
    {"block_until_ready", fp_block_until_ready, METH_O,
     "block_until_ready(buffer) -> True when ready, False when the buffer cannot be used."},
    {"buffer_finalizer", fp_buffer_finalizer, METH_NOARGS, "A Buffer.__del__ implemented here."},
    {"host_memory", (PyCFunction)(void (*)(void))fp_host_memory, METH_FASTCALL,
     "host_memory(buffer, nbytes) -> the ready buffer's memory read in place (a buffer-protocol object), or None."},
    {"pin_client", fp_pin_client, METH_O,
     "pin_client(client) -> its handle, a use counted until unpin_client(client) (Client.close waits for it); "
     "None when it is closed."},
    {"unpin_client", fp_unpin_client, METH_O, "unpin_client(client): end a pin_client."},
    {"struct_layouts", fp_struct_layouts, METH_NOARGS,
     "struct_layouts() -> {name: (size, ((field, offset), ...))} of the PJRT structs declared in C."},
    {"from_host", (PyCFunction)(void (*)(void))fp_from_host, METH_FASTCALL,
     "from_host(client, device, device_handle, data, pjrt_type, shape, dtype) -> a new Buffer, or None."},
    {"reap_executions", fp_reap_executions, METH_NOARGS,
     "reap_executions() -> how many interrupted executions are still running, after ending those that have "
     "(unpinning their arguments and client, destroying their outputs)."},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "ember._runtime._fastpath",
    "The per-call hot path of ember's runtime in C (see ember/_runtime/fastpath.py).", -1, module_methods,
};

PyMODINIT_FUNC PyInit__fastpath(void)
{
    if ((str_handle = PyUnicode_InternFromString("handle")) == NULL ||
        (str_destroy = PyUnicode_InternFromString("_destroy")) == NULL ||
        (str_fast = PyUnicode_InternFromString("_fast")) == NULL ||
        (str_shape = PyUnicode_InternFromString("shape")) == NULL ||
        (str_dtype = PyUnicode_InternFromString("dtype")) == NULL)
        return NULL;
    if (PyType_Ready(&ApiType) < 0 || PyType_Ready(&RunnerType) < 0 || PyType_Ready(&CallerType) < 0 ||
        PyType_Ready(&HostMemoryType) < 0)
        return NULL;
    PyObject *threading = PyImport_ImportModule("threading");
    PyObject *main_thread = threading ? PyObject_CallMethod(threading, "main_thread", NULL) : NULL;
    PyObject *ident = main_thread ? PyObject_GetAttrString(main_thread, "ident") : NULL;
    main_thread_ident = ident ? PyLong_AsUnsignedLong(ident) : 0;
    Py_XDECREF(ident);
    Py_XDECREF(main_thread);
    Py_XDECREF(threading);
    if (PyErr_Occurred() || pthread_atfork(NULL, NULL, helpers_after_fork) != 0)
        return PyErr_Occurred() ? NULL : PyErr_Format(PyExc_OSError, "pthread_atfork failed");
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL)
        return NULL;
    if (PyModule_AddIntConstant(module, "ABI", FASTPATH_ABI) < 0 ||
        PyModule_AddObjectRef(module, "Api", (PyObject *)&ApiType) < 0 ||
        PyModule_AddObjectRef(module, "Runner", (PyObject *)&RunnerType) < 0 ||
        PyModule_AddObjectRef(module, "Caller", (PyObject *)&CallerType) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
