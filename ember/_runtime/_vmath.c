/* ember._runtime._vmath: vectorized float32 transcendentals (vmath.h) as an XLA FFI handler (typed FFI, custom-call
 * api_version 4).
 *
 * The CPU plugin's XLA computes some float32 functions as a scalar libm call per element or a slow expansion: over
 * f32[2^22] on an AVX2 CPU (2 cores) sin took 49.7 ms, cos 48.6, tan 98, log1p 32.7, erf_inv 56 (jaxlib: 52, 51,
 * 76, 8.2, 20). vmath.h computes them a vector at a time (docs there: accuracy at least XLA's, denormals as XLA's).
 *
 * The call: `custom_call @ember_elementwise(x) -> y`, x and y float32 of one shape (row-major), the attribute `op`
 * (int64) naming the function by its code (op_names(): sin 0, cos 1, tan 2, tanh 3, log1p 4, erf_inv 5, exp 6,
 * log 7, expm1 8, erf 9, logistic 10). The elements are split among the pool's threads (pool.h) in shares of at
 * least MIN_SHARE (run_split). Anything else (another dtype, shapes that differ, an unknown op, not one operand and one result)
 * comes back as an XLA_FFI_Error naming ember_elementwise, never an abort.
 *
 * vmath.h is instantiated three times: 8 lanes for AVX2 + FMA, 16 lanes for AVX-512F, and 16 lanes compiled for AVX2
 * + FMA (only for the test hook `run`, so that a machine without AVX-512 tests the 16-lane source too). handlers()
 * offers the handler where the CPU has AVX-512F (16 lanes) or AVX2 and FMA (8 lanes); elsewhere (or built for
 * another architecture, or by a compiler other than GCC, the only one it was tested with) it offers nothing, and the
 * lowering keeps XLA's ops. */
#define _GNU_SOURCE /* (sched_getaffinity, CPU_COUNT: pool.h) */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ffi_api.h"
#include "pool.h"

/* vmath.h's functions take and return vectors wider than some instantiations' registers (16 lanes for AVX2): they
 * are static and always inlined into their caller of the same target, so no call crosses an ABI boundary. */
#pragma GCC diagnostic ignored "-Wpsabi"

#define MIN_SHARE (1 << 15) /* the fewest elements a thread is given (below: fewer threads) */

enum { OP_SIN, OP_COS, OP_TAN, OP_TANH, OP_LOG1P, OP_ERF_INV, OP_EXP, OP_LOG, OP_EXPM1, OP_ERF, OP_LOGISTIC,
       OP_COUNT };
static const char *const op_names_table[OP_COUNT] = {"sin", "cos", "tan", "tanh", "log1p", "erf_inv", "exp", "log",
                                                     "expm1", "erf", "logistic"};

typedef void (*ArrayFn)(const float *, float *, int64_t);

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HAVE_VMATH 1

#define VW 8
#define VM_TARGET __attribute__((target("avx2,fma")))
#define VM_SUFFIX avx2
#include "vmath.h"
#undef VW
#undef VM_TARGET
#undef VM_SUFFIX

#define VW 16
#define VM_TARGET __attribute__((target("avx512f")))
#define VM_SUFFIX avx512
#include "vmath.h"
#undef VW
#undef VM_TARGET
#undef VM_SUFFIX

#define VW 16
#define VM_TARGET __attribute__((target("avx2,fma")))
#define VM_SUFFIX avx2x16
#include "vmath.h"
#undef VW
#undef VM_TARGET
#undef VM_SUFFIX

#define TABLE(S)                                                                                              \
    {sin_array_##S, cos_array_##S, tan_array_##S, tanh_array_##S, log1p_array_##S, erf_inv_array_##S,          \
     exp_array_##S, log_array_##S, expm1_array_##S, erf_array_##S, logistic_array_##S}
static const ArrayFn table_avx2[OP_COUNT] = TABLE(avx2);
static const ArrayFn table_avx512[OP_COUNT] = TABLE(avx512);
static const ArrayFn table_avx2x16[OP_COUNT] = TABLE(avx2x16);

/* the lanes the CPU runs (16: AVX-512F, 8: AVX2 and FMA, 0: neither) */
static int cpu_width(void) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return 16;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 8;
    return 0;
}
#else
static int cpu_width(void) { return 0; }
#endif

/* the functions of this CPU's width (NULL where it has none) */
static const ArrayFn *cpu_table(void) {
#ifdef HAVE_VMATH
    int width = cpu_width();
    return width == 16 ? table_avx512 : width == 8 ? table_avx2 : NULL;
#else
    return NULL;
#endif
}

typedef struct {
    ArrayFn fn;
    const float *x;
    float *y;
    int64_t begin, end;
} Share;

static void *run_share(void *arg) {
    Share *s = (Share *)arg;
    s->fn(s->x + s->begin, s->y + s->begin, s->end - s->begin);
    return NULL;
}

/* fn over n elements, split among the pool's threads: in more shares than threads (up to MAX_SHARES, each of at
 * least MIN_SHARE elements, bounds multiples of 16), taken by whichever thread is free, so that a thread the OS
 * runs late (XLA's own pool spinning on the same cores after its ops) leaves its work to the others */
#define MAX_SHARES 32
static void run_split(ArrayFn fn, const float *x, float *y, int64_t n) {
    int64_t count = n / MIN_SHARE;
    if (cpu_count() == 1 || count < 1) count = 1;
    if (count > MAX_SHARES) count = MAX_SHARES;
    Share shares[MAX_SHARES];
    for (int64_t t = 0; t < count; t++) {
        int64_t begin = (n * t / count) & ~(int64_t)15;
        int64_t end = t + 1 == count ? n : (n * (t + 1) / count) & ~(int64_t)15;
        shares[t] = (Share){fn, x, y, begin, end};
    }
    run_shares(run_share, shares, sizeof(Share), (int)count);
}

static Ffi_Error *elementwise_handler(Ffi_CallFrame *frame) {
    if (answer_metadata(frame)) return NULL;
    if (frame->stage != FFI_EXECUTE) return NULL;
    const ArrayFn *table = cpu_table();
    if (table == NULL)
        return fail(frame, FFI_ERR_UNIMPLEMENTED,
                    "ember_elementwise: this CPU has neither AVX-512F nor AVX2 and FMA");
    if (frame->args.size != 1 || frame->rets.size != 1)
        return fail(frame, FFI_ERR_INVALID_ARGUMENT, "ember_elementwise: needs one operand and one result");
    Ffi_Buffer *x = (Ffi_Buffer *)frame->args.args[0], *y = (Ffi_Buffer *)frame->rets.args[0];
    int64_t op = attr_int(frame, "op", -1);
    if (op < 0 || op >= OP_COUNT)
        return fail(frame, FFI_ERR_INVALID_ARGUMENT, "ember_elementwise: the attribute op is not a known function");
    int same = x->dtype == FFI_F32 && y->dtype == FFI_F32 && x->rank == y->rank && x->rank >= 0;
    int64_t n = 1;
    for (int64_t d = 0; same && d < x->rank; d++) {
        if (x->dims[d] != y->dims[d] || x->dims[d] < 0 || __builtin_mul_overflow(n, x->dims[d], &n)
            || n > INT64_MAX / 8)
            same = 0;
    }
    if (!same)
        return fail(frame, FFI_ERR_INVALID_ARGUMENT,
                    "ember_elementwise: the operand and result must be float32 arrays of one shape");
    if (n > 0) run_split(table[op], (const float *)x->data, (float *)y->data, n);
    return NULL;
}

/* ---- module ---------------------------------------------------------------------------------------------- */
static PyObject *handlers(PyObject *self, PyObject *unused) {
    (void)self; (void)unused;
    static const Ffi_HandlerEntry table[] = {{"ember_elementwise", (void *)elementwise_handler}};
    return cpu_table() != NULL ? handler_dict(table, 1) : PyDict_New();
}

static PyObject *op_names(PyObject *self, PyObject *unused) {
    (void)self; (void)unused;
    PyObject *out = PyDict_New();
    for (int k = 0; out != NULL && k < OP_COUNT; k++) {
        PyObject *code = PyLong_FromLong(k);
        if (code == NULL || PyDict_SetItemString(out, op_names_table[k], code) < 0) {
            Py_XDECREF(code);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(code);
    }
    return out;
}

static PyObject *widths(PyObject *self, PyObject *unused) {
    (void)self; (void)unused;
    int width = cpu_width();
    if (width == 16) return Py_BuildValue("(ii)", 8, 16);
    if (width == 8) return Py_BuildValue("(ii)", 8, 16); /* (16: the AVX2 build of the 16-lane source) */
    return Py_BuildValue("()");
}

/* run(op, width, x, y): y[i] = op(x[i]) for float32 buffers x and y of one length, by the `width`-lane
 * instantiation (16 on a CPU without AVX-512F: the 16-lane source compiled for AVX2), on the calling thread when
 * threaded is false, else split as the handler splits. For the tests. */
static PyObject *run(PyObject *self, PyObject *args) {
    (void)self;
    const char *name;
    int width, threaded = 0;
    Py_buffer x, y;
    if (!PyArg_ParseTuple(args, "siy*w*|p", &name, &width, &x, &y, &threaded)) return NULL;
    PyObject *result = NULL;
    int op = -1;
    for (int k = 0; k < OP_COUNT; k++)
        if (strcmp(name, op_names_table[k]) == 0) op = k;
    const ArrayFn *table = NULL;
#ifdef HAVE_VMATH
    int cpu = cpu_width();
    if (width == 8 && cpu >= 8) table = table_avx2;
    if (width == 16 && cpu >= 8) table = cpu == 16 ? table_avx512 : table_avx2x16;
#endif
    if (op < 0) {
        PyErr_Format(PyExc_ValueError, "ember._runtime._vmath.run: unknown function %s", name);
    } else if (table == NULL) {
        PyErr_Format(PyExc_ValueError, "ember._runtime._vmath.run: no %d-lane functions on this CPU", width);
    } else if (x.len != y.len || x.len % 4 != 0) {
        PyErr_SetString(PyExc_ValueError,
                        "ember._runtime._vmath.run: x and y must be float32 buffers of one length");
    } else {
        int64_t n = x.len / 4;
        Py_BEGIN_ALLOW_THREADS
        if (threaded)
            run_split(table[op], (const float *)x.buf, (float *)y.buf, n);
        else
            table[op]((const float *)x.buf, (float *)y.buf, n);
        Py_END_ALLOW_THREADS
        result = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&x);
    PyBuffer_Release(&y);
    return result;
}

static PyMethodDef methods[] = {
    {"handlers", handlers, METH_NOARGS,
     "The FFI handler: {'ember_elementwise': address}; empty where the CPU has neither AVX-512F nor AVX2 and FMA."},
    {"op_names", op_names, METH_NOARGS, "The functions' codes (the attribute op): {name: code}."},
    {"widths", widths, METH_NOARGS, "The lane counts run() takes on this CPU (empty: none)."},
    {"run", run, METH_VARARGS,
     "run(name, width, x, y, threaded=False): y = name(x) over float32 buffers by the width-lane functions (tests)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "ember._runtime._vmath",
    "ember's vectorized float32 transcendentals as an XLA FFI handler (see the comment at the top of _vmath.c).", -1,
    methods,
};

PyMODINIT_FUNC PyInit__vmath(void) { return PyModule_Create(&module_def); }
