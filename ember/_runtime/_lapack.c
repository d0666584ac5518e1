/* ember._runtime._lapack: ember's LAPACK kernels as XLA FFI handlers (typed FFI, custom-call api_version 4).
 *
 * The PJRT CPU plugin has no LAPACK. Its FFI extension lets ember register handlers of its own for platform "Host"
 * (ember/_runtime/ffi.py does that with the addresses handlers() returns); a program calls one with
 * `stablehlo.custom_call @ember_lapack_<name>` (ember/_prims/linalg.py emits them). The LAPACK and BLAS routines
 * are scipy's: init() takes the PyCapsules of scipy.linalg.cython_lapack / cython_blas (`__pyx_capi__`).
 *
 * Conventions shared by every kernel:
 *   - matrices arrive and leave column-major in their last two dimensions (the lowering asks XLA for that layout
 *     with operand_layouts/result_layouts); leading dimensions are a batch, looped over here;
 *   - inputs are never written: each kernel copies its input into its output buffer and factors in place;
 *   - LAPACK's info comes back as an int32 output per matrix (as jaxlib's kernels do); a failed factorisation
 *     fills its outputs with NaN (cholesky of a matrix that is not positive definite: its triangle, the other
 *     one stays zero; eigh/svd that did not converge or saw a non-finite input), as JAX does on CPU;
 *   - routines are looked up per dtype in tables indexed by the FFI data type (F32, F64, C64, C128); where a
 *     complex routine's signature differs from the real one's (heevd, gesdd, geev, gees: real work arrays, real
 *     eigen/singular values, complex eigenvalues in one array), the kernel calls it through its own type;
 *     real outputs of a complex input (eigh's eigenvalues, svd's singular values) have the real dtype of its parts;
 *   - errors (a bad call frame, a dtype without a kernel, out of memory) are returned as XLA_FFI_Error through
 *     the call frame's api, never by aborting;
 *   - every kernel checks its buffers against what its signature and the call's attributes imply before it reads
 *     or writes any (operands of a dtype it has, matrices whose sizes fit LAPACK's int, each result of the shape
 *     and dtype ember's lowering gives it, batch dimensions alike): a call that disagrees, as one in a StableHLO
 *     text ember did not write may, is an error (INVALID_ARGUMENT), never a read or write past a buffer.
 *
 * The FFI declarations (ember's own, from xla/ffi/api/c_api.h) are in ffi_api.h, shared with _rows.c. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <complex.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ffi_api.h"

/* ---- LAPACK / BLAS signatures (scipy's cython_lapack: Fortran calling convention, 32-bit integers) ------- */
typedef void potrf_fn(char *uplo, int *n, void *a, int *lda, int *info);
typedef void getrf_fn(int *m, int *n, void *a, int *lda, int *ipiv, int *info);
typedef void geqrf_fn(int *m, int *n, void *a, int *lda, void *tau, void *work, int *lwork, int *info);
typedef void orgqr_fn(int *m, int *n, int *k, void *a, int *lda, void *tau, void *work, int *lwork, int *info);
typedef void syevd_fn(char *jobz, char *uplo, int *n, void *a, int *lda, void *w, void *work, int *lwork,
                      int *iwork, int *liwork, int *info);
typedef void gesdd_fn(char *jobz, int *m, int *n, void *a, int *lda, void *s, void *u, int *ldu, void *vt,
                      int *ldvt, void *work, int *lwork, int *iwork, int *info);
typedef void geev_fn(char *jobvl, char *jobvr, int *n, void *a, int *lda, void *wr, void *wi, void *vl, int *ldvl,
                     void *vr, int *ldvr, void *work, int *lwork, int *info);
typedef void heevd_fn(char *jobz, char *uplo, int *n, void *a, int *lda, void *w, void *work, int *lwork,
                      void *rwork, int *lrwork, int *iwork, int *liwork, int *info);
typedef void cgesdd_fn(char *jobz, int *m, int *n, void *a, int *lda, void *s, void *u, int *ldu, void *vt,
                       int *ldvt, void *work, int *lwork, void *rwork, int *iwork, int *info);
typedef void cgeev_fn(char *jobvl, char *jobvr, int *n, void *a, int *lda, void *w, void *vl, int *ldvl, void *vr,
                      int *ldvr, void *work, int *lwork, void *rwork, int *info);
typedef void gees_fn(char *jobvs, char *sort, void *select, int *n, void *a, int *lda, int *sdim, void *wr,
                     void *wi, void *vs, int *ldvs, void *work, int *lwork, int *bwork, int *info);
typedef void cgees_fn(char *jobvs, char *sort, void *select, int *n, void *a, int *lda, int *sdim, void *w,
                      void *vs, int *ldvs, void *work, int *lwork, void *rwork, int *bwork, int *info);
typedef void trsm_fn(char *side, char *uplo, char *transa, char *diag, int *m, int *n, void *alpha, void *a,
                     int *lda, void *b, int *ldb);
typedef void gesvd_fn(char *jobu, char *jobvt, int *m, int *n, void *a, int *lda, void *s, void *u, int *ldu,
                      void *vt, int *ldvt, void *work, int *lwork, int *info);
typedef void cgesvd_fn(char *jobu, char *jobvt, int *m, int *n, void *a, int *lda, void *s, void *u, int *ldu,
                       void *vt, int *ldvt, void *work, int *lwork, void *rwork, int *info);
typedef void gehrd_fn(int *n, int *ilo, int *ihi, void *a, int *lda, void *tau, void *work, int *lwork, int *info);
typedef void sytrd_fn(char *uplo, int *n, void *a, int *lda, void *d, void *e, void *tau, void *work, int *lwork,
                      int *info);
typedef void ormqr_fn(char *side, char *trans, int *m, int *n, int *k, void *a, int *lda, void *tau, void *c,
                      int *ldc, void *work, int *lwork, int *info);
typedef void gtsv_fn(int *n, int *nrhs, void *dl, void *d, void *du, void *b, int *ldb, int *info);

/* One table per routine, indexed by the FFI data type of its matrix. */
enum { R_POTRF, R_GETRF, R_GEQRF, R_ORGQR, R_SYEVD, R_GESDD, R_TRSM, R_GEEV, R_GEES, R_GESVD, R_GEHRD, R_SYTRD,
       R_ORMQR, R_GTSV, R_COUNT };
static void *routines[R_COUNT][FFI_TYPES];
static const char *routine_names[R_COUNT] = {"potrf", "getrf", "geqrf", "orgqr", "syevd", "gesdd", "trsm", "geev",
                                             "gees", "gesvd", "gehrd", "sytrd", "ormqr", "gtsv"};

/* ---- helpers -------------------------------------------------------------------------------------------- */
#define RET(f, i) ((Ffi_Buffer *)(f)->rets.args[i])
#define ARG(f, i) ((Ffi_Buffer *)(f)->args.args[i])

static size_t itemsize(int dtype) {
    switch (dtype) {
        case FFI_F32: return 4;
        case FFI_F64: return 8;
        case FFI_C64: return 8;
        case FFI_C128: return 16;
        default: return 0;
    }
}

static int is_complex(int dtype) { return dtype == FFI_C64 || dtype == FFI_C128; }

/* The dtype of a complex dtype's parts (a real dtype is its own). */
static int real_of(int dtype) { return dtype == FFI_C64 ? FFI_F32 : dtype == FFI_C128 ? FFI_F64 : dtype; }

static int64_t batch_of(Ffi_Buffer *b, int matrix_rank) {
    int64_t n = 1;
    for (int64_t i = 0; i < b->rank - matrix_rank; i++) n *= b->dims[i];
    return n;
}

/* ---- call checks (see the conventions above) ------------------------------------------------------------ */
#define MAX_LAPACK_DIM 2147483647 /* LAPACK's int */
#define MAX_RANK 64

/* A matrix operand: rank 2 or more (bounded), no negative dimension, its matrix dimensions fit LAPACK's int;
 * square: equal. */
static int matrix_ok(const Ffi_Buffer *a, int square) {
    if (a->rank < 2 || a->rank > MAX_RANK) return 0;
    for (int64_t i = 0; i < a->rank; i++)
        if (a->dims[i] < 0) return 0;
    int64_t m = a->dims[a->rank - 2], n = a->dims[a->rank - 1];
    if (m > MAX_LAPACK_DIM || n > MAX_LAPACK_DIM) return 0;
    return !square || m == n;
}

/* b has dtype, the leading batch_rank dimensions of like, then tail more: d0 (tail >= 1) and d1 (tail 2). */
static int shaped(const Ffi_Buffer *b, int dtype, const Ffi_Buffer *like, int64_t batch_rank, int tail, int64_t d0,
                  int64_t d1) {
    if (b->dtype != dtype || b->rank != batch_rank + tail) return 0;
    for (int64_t i = 0; i < batch_rank; i++)
        if (b->dims[i] != like->dims[i]) return 0;
    if (tail >= 1 && b->dims[batch_rank] != d0) return 0;
    if (tail >= 2 && b->dims[batch_rank + 1] != d1) return 0;
    return 1;
}

/* The complex dtype whose parts have a real dtype's type (a complex dtype is its own). */
static int complex_of(int dtype) { return dtype == FFI_F32 ? FFI_C64 : dtype == FFI_F64 ? FFI_C128 : dtype; }

static Ffi_Error *malformed(Ffi_CallFrame *frame, const char *kernel) {
    static _Thread_local char message[200];
    snprintf(message, sizeof message, "ember lapack kernel %s: its operands, results and attributes disagree "
             "(shapes, dtypes or sizes other than ember's lowering gives it): a malformed call", kernel);
    return fail(frame, FFI_ERR_INVALID_ARGUMENT, message);
}

/* Writes a NaN of dtype (real or complex: both parts) over count elements. */
static void fill_nan(void *data, int dtype, int64_t count) {
    if (dtype == FFI_F32 || dtype == FFI_C64) {
        float *p = (float *)data;
        int64_t k = count * (dtype == FFI_C64 ? 2 : 1);
        for (int64_t i = 0; i < k; i++) p[i] = NAN;
    } else {
        double *p = (double *)data;
        int64_t k = count * (dtype == FFI_C128 ? 2 : 1);
        for (int64_t i = 0; i < k; i++) p[i] = NAN;
    }
}

static int all_finite(const void *data, int dtype, int64_t count) {
    if (dtype == FFI_F32 || dtype == FFI_C64) {
        const float *p = (const float *)data;
        int64_t k = count * (dtype == FFI_C64 ? 2 : 1);
        for (int64_t i = 0; i < k; i++) if (!isfinite(p[i])) return 0;
    } else {
        const double *p = (const double *)data;
        int64_t k = count * (dtype == FFI_C128 ? 2 : 1);
        for (int64_t i = 0; i < k; i++) if (!isfinite(p[i])) return 0;
    }
    return 1;
}

/* Zeroes the strict upper (lower=1) or lower (lower=0) triangle of an n x n column-major matrix. */
static void zero_triangle(void *data, int dtype, int n, int lower) {
    size_t es = itemsize(dtype);
    char *a = (char *)data;
    for (int j = 0; j < n; j++) {
        if (lower) { if (j > 0) memset(a + (size_t)j * n * es, 0, (size_t)j * es); }
        else if (j + 1 < n) memset(a + ((size_t)j * n + j + 1) * es, 0, (size_t)(n - j - 1) * es);
    }
}

static void set_one(void *p, int dtype) {
    if (dtype == FFI_F32 || dtype == FFI_C64) *(float *)p = 1.0f; else *(double *)p = 1.0;
}

/* A workspace size that LAPACK reported in the first element of work (a real or complex value). */
static int work_size(const void *work, int dtype) {
    double v = (dtype == FFI_F32 || dtype == FFI_C64) ? (double)*(const float *)work : *(const double *)work;
    return v < 1 ? 1 : (int)(v * 1.0000001) + 1;
}

#define ENTER(frame, nargs, nrets)                                                                             \
    if (answer_metadata(frame)) return NULL;                                                                   \
    if ((frame)->stage != FFI_EXECUTE) return NULL;                                                            \
    if ((frame)->args.size != (nargs) || (frame)->rets.size != (nrets))                                        \
        return fail(frame, FFI_ERR_INVALID_ARGUMENT, "ember lapack kernel: wrong number of operands or results");

static Ffi_Error *routine_for(Ffi_CallFrame *frame, int r, int dtype, void **out) {
    static _Thread_local char message[128];
    if (dtype < 0 || dtype >= FFI_TYPES || routines[r][dtype] == NULL) {
        snprintf(message, sizeof message, "ember lapack kernel: no %s for FFI data type %d", routine_names[r],
                 dtype);
        return fail(frame, FFI_ERR_UNIMPLEMENTED, message);
    }
    *out = routines[r][dtype];
    return NULL;
}

#define OOM(frame) fail(frame, FFI_ERR_RESOURCE_EXHAUSTED, "ember lapack kernel: out of memory for the workspace")

/* ---- potrf: a (..., n, n) -> (factor (..., n, n), info (...)); lower=1: L (a = L L^H), else U. ------------ */
static Ffi_Error *potrf_handler(Ffi_CallFrame *frame) {
    ENTER(frame, 1, 2)
    Ffi_Buffer *a = ARG(frame, 0), *out = RET(frame, 0), *info = RET(frame, 1);
    void *fn = NULL;
    Ffi_Error *err = routine_for(frame, R_POTRF, a->dtype, &fn);
    if (err) return err;
    if (!matrix_ok(a, 1)) return malformed(frame, "potrf");
    int64_t br = a->rank - 2, nn = a->dims[br];
    if (!shaped(out, a->dtype, a, br, 2, nn, nn) || !shaped(info, FFI_S32, a, br, 0, 0, 0))
        return malformed(frame, "potrf");
    int lower = (int)attr_int(frame, "lower", 1);
    int n = (int)a->dims[a->rank - 1];
    int64_t batch = batch_of(a, 2);
    if (batch == 0) return NULL;
    size_t es = itemsize(a->dtype), step = (size_t)n * n * es;
    char uplo = lower ? 'L' : 'U';
    int lda = n > 1 ? n : 1;
    if (out->data != a->data) memcpy(out->data, a->data, step * batch);
    for (int64_t b = 0; b < batch; b++) {
        char *m = (char *)out->data + b * step;
        int *inf = (int *)info->data + b;
        if (n == 0) { *inf = 0; continue; }
        ((potrf_fn *)fn)(&uplo, &n, m, &lda, inf);
        if (*inf != 0) fill_nan(m, a->dtype, (int64_t)n * n);  /* NaN in the factor's triangle, as JAX */
        zero_triangle(m, a->dtype, n, lower);
    }
    return NULL;
}

/* ---- getrf: a (..., m, n) -> (lu, pivots (..., min(m, n)) zero-based, permutation (..., m), info (...)); the
 * permutation composes the row swaps: row i of the permuted a is row permutation[i] of a. ------------------- */
static Ffi_Error *getrf_handler(Ffi_CallFrame *frame) {
    ENTER(frame, 1, 4)
    Ffi_Buffer *a = ARG(frame, 0), *out = RET(frame, 0), *piv = RET(frame, 1), *perm = RET(frame, 2);
    Ffi_Buffer *info = RET(frame, 3);
    void *fn = NULL;
    Ffi_Error *err = routine_for(frame, R_GETRF, a->dtype, &fn);
    if (err) return err;
    if (!matrix_ok(a, 0)) return malformed(frame, "getrf");
    int64_t br = a->rank - 2, mm = a->dims[br], nn = a->dims[br + 1], kk = mm < nn ? mm : nn;
    if (!shaped(out, a->dtype, a, br, 2, mm, nn) || !shaped(piv, FFI_S32, a, br, 1, kk, 0)
        || !shaped(perm, FFI_S32, a, br, 1, mm, 0) || !shaped(info, FFI_S32, a, br, 0, 0, 0))
        return malformed(frame, "getrf");
    int m = (int)a->dims[a->rank - 2], n = (int)a->dims[a->rank - 1], k = m < n ? m : n;
    int64_t batch = batch_of(a, 2);
    if (batch == 0) return NULL;
    size_t step = (size_t)m * n * itemsize(a->dtype);
    int lda = m > 1 ? m : 1;
    if (out->data != a->data) memcpy(out->data, a->data, step * batch);
    for (int64_t b = 0; b < batch; b++) {
        int *p = (int *)piv->data + b * k, *q = (int *)perm->data + b * m, *inf = (int *)info->data + b;
        for (int i = 0; i < m; i++) q[i] = i;
        *inf = 0;
        if (k == 0) continue;
        ((getrf_fn *)fn)(&m, &n, (char *)out->data + b * step, &lda, p, inf);
        for (int i = 0; i < k; i++) {
            p[i] -= 1;
            int t = q[i]; q[i] = q[p[i]]; q[p[i]] = t;
        }
    }
    return NULL;
}

/* ---- geqrf: a (..., m, n) -> (householder reflectors and R, taus (..., min(m, n)), info (...)). ----------- */
static Ffi_Error *geqrf_handler(Ffi_CallFrame *frame) {
    ENTER(frame, 1, 3)
    Ffi_Buffer *a = ARG(frame, 0), *out = RET(frame, 0), *tau = RET(frame, 1), *info = RET(frame, 2);
    void *fn = NULL;
    Ffi_Error *err = routine_for(frame, R_GEQRF, a->dtype, &fn);
    if (err) return err;
    if (!matrix_ok(a, 0)) return malformed(frame, "geqrf");
    int64_t br = a->rank - 2, mm = a->dims[br], nn = a->dims[br + 1], kk = mm < nn ? mm : nn;
    if (!shaped(out, a->dtype, a, br, 2, mm, nn) || !shaped(tau, a->dtype, a, br, 1, kk, 0)
        || !shaped(info, FFI_S32, a, br, 0, 0, 0))
        return malformed(frame, "geqrf");
    int m = (int)a->dims[a->rank - 2], n = (int)a->dims[a->rank - 1], k = m < n ? m : n;
    int64_t batch = batch_of(a, 2);
    if (batch == 0) return NULL;
    size_t es = itemsize(a->dtype), step = (size_t)m * n * es;
    int lda = m > 1 ? m : 1, lwork = -1;
    if (out->data != a->data) memcpy(out->data, a->data, step * batch);
    if (k == 0) { memset(info->data, 0, batch * sizeof(int)); return NULL; }
    char query[32];
    ((geqrf_fn *)fn)(&m, &n, out->data, &lda, tau->data, query, &lwork, (int *)info->data);
    lwork = work_size(query, a->dtype);
    void *work = malloc((size_t)lwork * es);
    if (!work) return OOM(frame);
    for (int64_t b = 0; b < batch; b++)
        ((geqrf_fn *)fn)(&m, &n, (char *)out->data + b * step, &lda, (char *)tau->data + b * k * es, work, &lwork,
                         (int *)info->data + b);
    free(work);
    return NULL;
}

/* ---- orgqr: (reflectors (..., m, n), taus (..., k)) -> (q (..., m, n), info): the first n columns of Q. ---- */
static Ffi_Error *orgqr_handler(Ffi_CallFrame *frame) {
    ENTER(frame, 2, 2)
    Ffi_Buffer *a = ARG(frame, 0), *tau = ARG(frame, 1), *out = RET(frame, 0), *info = RET(frame, 1);
    void *fn = NULL;
    Ffi_Error *err = routine_for(frame, R_ORGQR, a->dtype, &fn);
    if (err) return err;
    if (!matrix_ok(a, 0) || tau->rank != a->rank - 1) return malformed(frame, "orgqr");
    int64_t br = a->rank - 2, mm = a->dims[br], nn = a->dims[br + 1], kk = tau->dims[br];
    if (!(0 <= kk && kk <= nn && nn <= mm) || !shaped(tau, a->dtype, a, br, 1, kk, 0)
        || !shaped(out, a->dtype, a, br, 2, mm, nn) || !shaped(info, FFI_S32, a, br, 0, 0, 0))
        return malformed(frame, "orgqr"); /* (LAPACK's orgqr needs m >= n >= k) */
    int m = (int)a->dims[a->rank - 2], n = (int)a->dims[a->rank - 1], k = (int)tau->dims[tau->rank - 1];
    int64_t batch = batch_of(a, 2);
    if (batch == 0) return NULL;
    size_t es = itemsize(a->dtype), step = (size_t)m * n * es;
    int lda = m > 1 ? m : 1, lwork = -1;
    if (out->data != a->data) memcpy(out->data, a->data, step * batch);
    if (n == 0 || m == 0) { memset(info->data, 0, batch * sizeof(int)); return NULL; }
    char query[32];
    ((orgqr_fn *)fn)(&m, &n, &k, out->data, &lda, tau->data, query, &lwork, (int *)info->data);
    lwork = work_size(query, a->dtype);
    void *work = malloc((size_t)lwork * es);
    if (!work) return OOM(frame);
    for (int64_t b = 0; b < batch; b++)
        ((orgqr_fn *)fn)(&m, &n, &k, (char *)out->data + b * step, &lda, (char *)tau->data + b * k * es, work,
                         &lwork, (int *)info->data + b);
    free(work);
    return NULL;
}

/* ---- syevd: a (..., n, n) -> (eigenvectors (..., n, n) as columns, eigenvalues ascending (..., n), info); a
 * complex (Hermitian) a takes heevd, its eigenvalues real. ------------------------------------------------------ */
static Ffi_Error *syevd_handler(Ffi_CallFrame *frame) {
    ENTER(frame, 1, 3)
    Ffi_Buffer *a = ARG(frame, 0), *v = RET(frame, 0), *w = RET(frame, 1), *info = RET(frame, 2);
    void *fn = NULL;
    Ffi_Error *err = routine_for(frame, R_SYEVD, a->dtype, &fn);
    if (err) return err;
    if (!matrix_ok(a, 1)) return malformed(frame, "syevd");
    int64_t br = a->rank - 2, nn = a->dims[br];
    if (!shaped(v, a->dtype, a, br, 2, nn, nn) || !shaped(w, real_of(a->dtype), a, br, 1, nn, 0)
        || !shaped(info, FFI_S32, a, br, 0, 0, 0))
        return malformed(frame, "syevd");
    int lower = (int)attr_int(frame, "lower", 1);
    int n = (int)a->dims[a->rank - 1];
    int64_t batch = batch_of(a, 2);
    if (batch == 0) return NULL;
    int cplx = is_complex(a->dtype), rdt = real_of(a->dtype);
    size_t es = itemsize(a->dtype), rs = itemsize(rdt), step = (size_t)n * n * es;
    char jobz = 'V', uplo = lower ? 'L' : 'U';
    int lda = n > 1 ? n : 1, lwork = -1, liwork = -1, lrwork = -1, iquery = 0;
    if (v->data != a->data) memcpy(v->data, a->data, step * batch);
    if (n == 0) { memset(info->data, 0, batch * sizeof(int)); return NULL; }
    char query[32], rquery[32];
    if (cplx)
        ((heevd_fn *)fn)(&jobz, &uplo, &n, v->data, &lda, w->data, query, &lwork, rquery, &lrwork, &iquery, &liwork,
                         (int *)info->data);
    else
        ((syevd_fn *)fn)(&jobz, &uplo, &n, v->data, &lda, w->data, query, &lwork, &iquery, &liwork,
                         (int *)info->data);
    lwork = work_size(query, a->dtype);
    lrwork = cplx ? work_size(rquery, rdt) : 1;
    liwork = iquery < 1 ? 1 : iquery;
    void *work = malloc((size_t)lwork * es), *rwork = malloc((size_t)lrwork * rs);
    int *iwork = malloc((size_t)liwork * sizeof(int));
    if (!work || !iwork || !rwork) { free(work); free(iwork); free(rwork); return OOM(frame); }
    for (int64_t b = 0; b < batch; b++) {
        char *vb = (char *)v->data + b * step;
        char *wb = (char *)w->data + b * n * rs;
        int *inf = (int *)info->data + b;
        if (!all_finite(vb, a->dtype, (int64_t)n * n)) *inf = -1000;
        else if (cplx)
            ((heevd_fn *)fn)(&jobz, &uplo, &n, vb, &lda, wb, work, &lwork, rwork, &lrwork, iwork, &liwork, inf);
        else ((syevd_fn *)fn)(&jobz, &uplo, &n, vb, &lda, wb, work, &lwork, iwork, &liwork, inf);
        if (*inf != 0) { fill_nan(vb, a->dtype, (int64_t)n * n); fill_nan(wb, rdt, n); }
    }
    free(work);
    free(rwork);
    free(iwork);
    return NULL;
}

/* ---- gesdd: a (..., m, n) -> (s (..., k), u, vt, info) with job 1 (reduced: u (m, k), vt (k, n)) or 2 (full:
 * u (m, m), vt (n, n)); job 0 (values only) -> (s, info). s is real (of a complex a too: its parts' dtype). The
 * target ember_lapack_gesvd runs gesvd (the QR algorithm: jax.lax.linalg.SvdAlgorithm.QR) through the same code
 * instead of gesdd (divide and conquer); gesvd takes no iwork and the first 5 k entries of the same rwork. ------- */
static void call_svd(void *fn, int qr, int cplx, char *jobz, int *m, int *n, void *a, int *lda, void *s, void *u,
                     int *ldu, void *vt, int *ldvt, void *work, int *lwork, void *rwork, int *iwork, int *info) {
    if (qr && cplx) ((cgesvd_fn *)fn)(jobz, jobz, m, n, a, lda, s, u, ldu, vt, ldvt, work, lwork, rwork, info);
    else if (qr) ((gesvd_fn *)fn)(jobz, jobz, m, n, a, lda, s, u, ldu, vt, ldvt, work, lwork, info);
    else if (cplx) ((cgesdd_fn *)fn)(jobz, m, n, a, lda, s, u, ldu, vt, ldvt, work, lwork, rwork, iwork, info);
    else ((gesdd_fn *)fn)(jobz, m, n, a, lda, s, u, ldu, vt, ldvt, work, lwork, iwork, info);
}

static Ffi_Error *svd_kernel(Ffi_CallFrame *frame, int qr) {
    if (answer_metadata(frame)) return NULL;
    if (frame->stage != FFI_EXECUTE) return NULL;
    int64_t job64 = attr_int(frame, "job", 1);
    if (job64 < 0 || job64 > 2) return malformed(frame, "gesdd");
    int job = (int)job64;
    int nrets = job == 0 ? 2 : 4;
    if (frame->args.size != 1 || frame->rets.size != nrets)
        return fail(frame, FFI_ERR_INVALID_ARGUMENT, "ember lapack kernel: wrong number of operands or results");
    Ffi_Buffer *a = ARG(frame, 0), *s = RET(frame, 0);
    Ffi_Buffer *u = job ? RET(frame, 1) : NULL, *vt = job ? RET(frame, 2) : NULL, *info = RET(frame, nrets - 1);
    void *fn = NULL;
    Ffi_Error *err = routine_for(frame, qr ? R_GESVD : R_GESDD, a->dtype, &fn);
    if (err) return err;
    if (!matrix_ok(a, 0)) return malformed(frame, "gesdd");
    {
        int64_t br = a->rank - 2, mm = a->dims[br], nn = a->dims[br + 1], kk = mm < nn ? mm : nn;
        if (!shaped(s, real_of(a->dtype), a, br, 1, kk, 0) || !shaped(info, FFI_S32, a, br, 0, 0, 0)
            || (job && !shaped(u, a->dtype, a, br, 2, mm, job == 2 ? mm : kk))
            || (job && !shaped(vt, a->dtype, a, br, 2, job == 2 ? nn : kk, nn)))
            return malformed(frame, "gesdd");
    }
    int m = (int)a->dims[a->rank - 2], n = (int)a->dims[a->rank - 1], k = m < n ? m : n;
    int64_t batch = batch_of(a, 2);
    if (batch == 0) return NULL;
    int cplx = is_complex(a->dtype), rdt = real_of(a->dtype);
    size_t es = itemsize(a->dtype), rs = itemsize(rdt), step = (size_t)m * n * es;
    char jobz = job == 0 ? 'N' : job == 1 ? 'S' : 'A';
    int ucols = job == 2 ? m : k, vrows = job == 2 ? n : k;
    int lda = m > 1 ? m : 1, ldu = m > 1 ? m : 1, ldvt = vrows > 1 ? vrows : 1, lwork = -1;
    size_t ustep = (size_t)m * ucols * es, vstep = (size_t)vrows * n * es;
    if (k == 0) {  /* an empty matrix: no values; full u and vt are identities */
        memset(info->data, 0, batch * sizeof(int));
        if (job == 2) {
            memset(u->data, 0, ustep * batch);
            memset(vt->data, 0, vstep * batch);
            for (int64_t b = 0; b < batch; b++) {
                for (int i = 0; i < m; i++) {
                    char *p = (char *)u->data + b * ustep + ((size_t)i * m + i) * es;
                    set_one(p, a->dtype);
                }
                for (int i = 0; i < n; i++) {
                    char *p = (char *)vt->data + b * vstep + ((size_t)i * n + i) * es;
                    set_one(p, a->dtype);
                }
            }
        }
        return NULL;
    }
    /* the complex routine's real workspace (LAPACK >= 3.7's bound) */
    size_t big = (size_t)(m > n ? m : n), lrwork = job == 0 ? (size_t)7 * k
        : (size_t)k * ((size_t)5 * k + 7 > 2 * big + 2 * (size_t)k + 1 ? (size_t)5 * k + 7 : 2 * big + 2 * (size_t)k + 1);
    void *copy = malloc(step), *rwork = cplx ? malloc((lrwork > 0 ? lrwork : 1) * rs) : NULL;
    int *iwork = malloc((size_t)8 * k * sizeof(int));
    if (!copy || !iwork || (cplx && !rwork)) { free(copy); free(iwork); free(rwork); return OOM(frame); }
    char query[32];
    memcpy(copy, a->data, step);
    call_svd(fn, qr, cplx, &jobz, &m, &n, copy, &lda, s->data, job ? u->data : NULL, &ldu, job ? vt->data : NULL,
             &ldvt, query, &lwork, rwork, iwork, (int *)info->data);
    lwork = work_size(query, a->dtype);
    void *work = malloc((size_t)lwork * es);
    if (!work) { free(copy); free(iwork); free(rwork); return OOM(frame); }
    for (int64_t b = 0; b < batch; b++) {
        char *sb = (char *)s->data + b * k * rs;
        char *ub = job ? (char *)u->data + b * ustep : NULL, *vb = job ? (char *)vt->data + b * vstep : NULL;
        int *inf = (int *)info->data + b;
        memcpy(copy, (char *)a->data + b * step, step);
        if (!all_finite(copy, a->dtype, (int64_t)m * n)) *inf = -1000;
        else call_svd(fn, qr, cplx, &jobz, &m, &n, copy, &lda, sb, ub, &ldu, vb, &ldvt, work, &lwork, rwork, iwork, inf);
        if (*inf != 0) {
            fill_nan(sb, rdt, k);
            if (job) { fill_nan(ub, a->dtype, (int64_t)m * ucols); fill_nan(vb, a->dtype, (int64_t)vrows * n); }
        }
    }
    free(work);
    free(copy);
    free(rwork);
    free(iwork);
    return NULL;
}

static Ffi_Error *gesdd_handler(Ffi_CallFrame *frame) { return svd_kernel(frame, 0); }
static Ffi_Error *gesvd_handler(Ffi_CallFrame *frame) { return svd_kernel(frame, 1); }

/* ---- trsm: (a (..., k, k), b (..., m, n)) -> x with op(a) x = b (left_side) or x op(a) = b; op by transpose_a
 * (0 none, 1 transpose, 2 conjugate transpose); a's other triangle is never read. ----------------------------- */
static Ffi_Error *trsm_handler(Ffi_CallFrame *frame) {
    ENTER(frame, 2, 1)
    Ffi_Buffer *a = ARG(frame, 0), *bb = ARG(frame, 1), *out = RET(frame, 0);
    void *fn = NULL;
    Ffi_Error *err = routine_for(frame, R_TRSM, a->dtype, &fn);
    if (err) return err;
    int left = (int)attr_int(frame, "left_side", 1), lower = (int)attr_int(frame, "lower", 1);
    int trans = (int)attr_int(frame, "transpose_a", 0), unit = (int)attr_int(frame, "unit_diagonal", 0);
    if (!matrix_ok(a, 1) || !matrix_ok(bb, 0) || a->rank != bb->rank || trans < 0 || trans > 2)
        return malformed(frame, "trsm");
    {
        int64_t br = bb->rank - 2, mm = bb->dims[br], nn = bb->dims[br + 1], kk = left ? mm : nn;
        if (!shaped(a, bb->dtype, bb, br, 2, kk, kk) || !shaped(out, bb->dtype, bb, br, 2, mm, nn))
            return malformed(frame, "trsm");
    }
    int k = (int)a->dims[a->rank - 1];
    int m = (int)bb->dims[bb->rank - 2], n = (int)bb->dims[bb->rank - 1];
    int64_t batch = batch_of(bb, 2);
    if (batch == 0) return NULL;
    size_t es = itemsize(a->dtype), astep = (size_t)k * k * es, bstep = (size_t)m * n * es;
    char side = left ? 'L' : 'R', uplo = lower ? 'L' : 'U', diag = unit ? 'U' : 'N';
    char transa = trans == 0 ? 'N' : trans == 1 ? 'T' : 'C';
    int lda = k > 1 ? k : 1, ldb = m > 1 ? m : 1;
    double one[2] = {1.0, 0.0};
    float onef[2] = {1.0f, 0.0f};
    void *alpha = (a->dtype == FFI_F32 || a->dtype == FFI_C64) ? (void *)onef : (void *)one;
    if (out->data != bb->data) memcpy(out->data, bb->data, bstep * batch);
    if (m == 0 || n == 0) return NULL;
    for (int64_t b = 0; b < batch; b++)
        ((trsm_fn *)fn)(&side, &uplo, &transa, &diag, &m, &n, alpha, (char *)a->data + b * astep, &lda,
                        (char *)out->data + b * bstep, &ldb);
    return NULL;
}

/* ---- geev: a (..., n, n) -> (w (..., n) complex, [vl (..., n, n) complex], [vr (..., n, n) complex], info):
 * the eigenvalues, and the left/right eigenvectors as columns (compute_left, compute_right), as LAPACK gives them
 * (unit 2-norm, largest component real); a complex a takes geev of c/z. For a real a, LAPACK's real output packs a complex pair's vectors into two real
 * columns (re, im); they are unpacked into complex columns v_j = re + i im, v_j+1 = re - i im. ------------------ */
static void unpack_vectors(const void *packed, const void *wi, void *out, int dtype, int n) {
    /* packed: n x n real (column-major); out: n x n complex (column-major, interleaved parts) */
    int single = dtype == FFI_F32;
    for (int j = 0; j < n; j++) {
        double imag_j = single ? ((const float *)wi)[j] : ((const double *)wi)[j];
        for (int i = 0; i < n; i++) {
            double re, im;
            if (imag_j == 0.0) {
                re = single ? ((const float *)packed)[(size_t)j * n + i] : ((const double *)packed)[(size_t)j * n + i];
                im = 0.0;
            } else {
                int first = imag_j > 0.0 ? j : j - 1; /* the pair's first column holds re, its second im */
                re = single ? ((const float *)packed)[(size_t)first * n + i]
                            : ((const double *)packed)[(size_t)first * n + i];
                im = single ? ((const float *)packed)[(size_t)(first + 1) * n + i]
                            : ((const double *)packed)[(size_t)(first + 1) * n + i];
                if (imag_j < 0.0) im = -im;
            }
            size_t k = 2 * ((size_t)j * n + i);
            if (single) { ((float *)out)[k] = (float)re; ((float *)out)[k + 1] = (float)im; }
            else { ((double *)out)[k] = re; ((double *)out)[k + 1] = im; }
        }
    }
}

/* A complex a: geev of c/z gives the eigenvalues and the vectors as complex arrays directly. */
static Ffi_Error *complex_geev(Ffi_CallFrame *frame, void *fn, Ffi_Buffer *a, Ffi_Buffer *w, Ffi_Buffer *vl,
                               Ffi_Buffer *vr, Ffi_Buffer *info) {
    int n = (int)a->dims[a->rank - 1];
    int64_t batch = batch_of(a, 2);
    int left = vl != NULL, right = vr != NULL;
    size_t es = itemsize(a->dtype), rs = itemsize(real_of(a->dtype)), step = (size_t)n * n * es;
    char jobvl = left ? 'V' : 'N', jobvr = right ? 'V' : 'N';
    int lda = n > 1 ? n : 1, ldvl = left && n > 1 ? n : 1, ldvr = right && n > 1 ? n : 1, lwork = -1, inf0 = 0;
    char *copy = malloc(step + 2 * (size_t)n * rs + 2 * es); /* a's copy, rwork (2n real), a dummy vector */
    if (!copy) return OOM(frame);
    char *rwork = copy + step, *dummy = rwork + 2 * (size_t)n * rs;
    char query[32];
    memcpy(copy, a->data, step);
    ((cgeev_fn *)fn)(&jobvl, &jobvr, &n, copy, &lda, w->data, left ? vl->data : dummy, &ldvl,
                     right ? vr->data : dummy, &ldvr, query, &lwork, rwork, &inf0);
    lwork = work_size(query, a->dtype);
    void *work = malloc((size_t)lwork * es);
    if (!work) { free(copy); return OOM(frame); }
    for (int64_t b = 0; b < batch; b++) {
        int *inf = (int *)info->data + b;
        char *wb = (char *)w->data + b * (size_t)n * es;
        char *vlb = left ? (char *)vl->data + b * step : dummy, *vrb = right ? (char *)vr->data + b * step : dummy;
        memcpy(copy, (char *)a->data + b * step, step);
        if (!all_finite(copy, a->dtype, (int64_t)n * n)) *inf = -1000;
        else ((cgeev_fn *)fn)(&jobvl, &jobvr, &n, copy, &lda, wb, vlb, &ldvl, vrb, &ldvr, work, &lwork, rwork, inf);
        if (*inf != 0) {
            fill_nan(wb, a->dtype, n);
            if (left) fill_nan(vlb, a->dtype, (int64_t)n * n);
            if (right) fill_nan(vrb, a->dtype, (int64_t)n * n);
        }
    }
    free(work);
    free(copy);
    return NULL;
}

static Ffi_Error *geev_handler(Ffi_CallFrame *frame) {
    if (answer_metadata(frame)) return NULL;
    if (frame->stage != FFI_EXECUTE) return NULL;
    int64_t left64 = attr_int(frame, "compute_left", 0), right64 = attr_int(frame, "compute_right", 0);
    if (left64 < 0 || left64 > 1 || right64 < 0 || right64 > 1) return malformed(frame, "geev");
    int left = (int)left64, right = (int)right64;
    int nrets = 2 + left + right;
    if (frame->args.size != 1 || frame->rets.size != nrets)
        return fail(frame, FFI_ERR_INVALID_ARGUMENT, "ember lapack kernel: wrong number of operands or results");
    Ffi_Buffer *a = ARG(frame, 0), *w = RET(frame, 0), *info = RET(frame, nrets - 1);
    Ffi_Buffer *vl = left ? RET(frame, 1) : NULL, *vr = right ? RET(frame, 1 + left) : NULL;
    void *fn = NULL;
    Ffi_Error *err = routine_for(frame, R_GEEV, a->dtype, &fn);
    if (err) return err;
    if (!matrix_ok(a, 1)) return malformed(frame, "geev");
    {
        int64_t br = a->rank - 2, nn = a->dims[br];
        int ct = complex_of(a->dtype);
        if (!shaped(w, ct, a, br, 1, nn, 0) || !shaped(info, FFI_S32, a, br, 0, 0, 0)
            || (left && !shaped(vl, ct, a, br, 2, nn, nn)) || (right && !shaped(vr, ct, a, br, 2, nn, nn)))
            return malformed(frame, "geev");
    }
    int n = (int)a->dims[a->rank - 1];
    int64_t batch = batch_of(a, 2);
    if (batch == 0) return NULL;
    if (n == 0) { memset(info->data, 0, batch * sizeof(int)); return NULL; }
    if (is_complex(a->dtype)) return complex_geev(frame, fn, a, w, vl, vr, info);
    int complex_type = a->dtype == FFI_F32 ? FFI_C64 : FFI_C128;
    size_t es = itemsize(a->dtype), step = (size_t)n * n * es;
    char jobvl = left ? 'V' : 'N', jobvr = right ? 'V' : 'N';
    int lda = n > 1 ? n : 1, ldvl = left && n > 1 ? n : 1, ldvr = right && n > 1 ? n : 1, lwork = -1;
    char *scratch = malloc(step * 3 + 2 * (size_t)n * es); /* a's copy, vl, vr (real, packed), wr, wi */
    if (!scratch) return OOM(frame);
    char *copy = scratch, *pvl = scratch + step, *pvr = scratch + 2 * step, *wr = scratch + 3 * step;
    char *wi = wr + (size_t)n * es;
    char query[32];
    int inf0 = 0;
    memcpy(copy, a->data, step);
    ((geev_fn *)fn)(&jobvl, &jobvr, &n, copy, &lda, wr, wi, pvl, &ldvl, pvr, &ldvr, query, &lwork, &inf0);
    lwork = work_size(query, a->dtype);
    void *work = malloc((size_t)lwork * es);
    if (!work) { free(scratch); return OOM(frame); }
    for (int64_t b = 0; b < batch; b++) {
        int *inf = (int *)info->data + b;
        char *wb = (char *)w->data + b * (size_t)n * 2 * es;
        char *vlb = left ? (char *)vl->data + b * step * 2 : NULL, *vrb = right ? (char *)vr->data + b * step * 2 : NULL;
        memcpy(copy, (char *)a->data + b * step, step);
        if (!all_finite(copy, a->dtype, (int64_t)n * n)) *inf = -1000;
        else ((geev_fn *)fn)(&jobvl, &jobvr, &n, copy, &lda, wr, wi, pvl, &ldvl, pvr, &ldvr, work, &lwork, inf);
        if (*inf != 0) {
            fill_nan(wb, complex_type, n);
            if (left) fill_nan(vlb, complex_type, (int64_t)n * n);
            if (right) fill_nan(vrb, complex_type, (int64_t)n * n);
            continue;
        }
        for (int i = 0; i < n; i++) {
            if (es == 4) { ((float *)wb)[2 * i] = ((float *)wr)[i]; ((float *)wb)[2 * i + 1] = ((float *)wi)[i]; }
            else { ((double *)wb)[2 * i] = ((double *)wr)[i]; ((double *)wb)[2 * i + 1] = ((double *)wi)[i]; }
        }
        if (left) unpack_vectors(pvl, wi, vlb, a->dtype, n);
        if (right) unpack_vectors(pvr, wi, vrb, a->dtype, n);
    }
    free(work);
    free(scratch);
    return NULL;
}

/* ---- gees: a (..., n, n) -> (t (..., n, n), [vs (..., n, n)], info): the Schur form a = vs t vs^H, unsorted;
 * t is quasi upper triangular (2x2 blocks for complex pairs) for a real a, upper triangular for a complex one;
 * vs with vectors=1. ---------------------------------------------------------------------------------------- */
static Ffi_Error *gees_handler(Ffi_CallFrame *frame) {
    if (answer_metadata(frame)) return NULL;
    if (frame->stage != FFI_EXECUTE) return NULL;
    int64_t vectors64 = attr_int(frame, "vectors", 1);
    if (vectors64 < 0 || vectors64 > 1) return malformed(frame, "gees");
    int vectors = (int)vectors64;
    int nrets = vectors ? 3 : 2;
    if (frame->args.size != 1 || frame->rets.size != nrets)
        return fail(frame, FFI_ERR_INVALID_ARGUMENT, "ember lapack kernel: wrong number of operands or results");
    Ffi_Buffer *a = ARG(frame, 0), *t = RET(frame, 0), *vs = vectors ? RET(frame, 1) : NULL;
    Ffi_Buffer *info = RET(frame, nrets - 1);
    void *fn = NULL;
    Ffi_Error *err = routine_for(frame, R_GEES, a->dtype, &fn);
    if (err) return err;
    if (!matrix_ok(a, 1)) return malformed(frame, "gees");
    {
        int64_t br = a->rank - 2, nn = a->dims[br];
        if (!shaped(t, a->dtype, a, br, 2, nn, nn) || !shaped(info, FFI_S32, a, br, 0, 0, 0)
            || (vectors && !shaped(vs, a->dtype, a, br, 2, nn, nn)))
            return malformed(frame, "gees");
    }
    int n = (int)a->dims[a->rank - 1];
    int64_t batch = batch_of(a, 2);
    if (batch == 0) return NULL;
    int cplx = is_complex(a->dtype);
    size_t es = itemsize(a->dtype), rs = itemsize(real_of(a->dtype)), step = (size_t)n * n * es;
    char jobvs = vectors ? 'V' : 'N', sort = 'N';
    int lda = n > 1 ? n : 1, ldvs = vectors && n > 1 ? n : 1, lwork = -1, sdim = 0;
    if (t->data != a->data) memcpy(t->data, a->data, step * batch);
    if (n == 0) { memset(info->data, 0, batch * sizeof(int)); return NULL; }
    /* eigenvalues (wr, wi; or w complex), rwork (n real), bwork (n ints, unused unsorted), a dummy vs */
    char *scratch = malloc(2 * (size_t)n * es + (size_t)n * rs + (size_t)n * sizeof(int) + 2 * es);
    if (!scratch) return OOM(frame);
    char *wr = scratch, *wi = scratch + (size_t)n * es, *rwork = scratch + 2 * (size_t)n * es;
    int *bwork = (int *)(rwork + (size_t)n * rs);
    char *dummy = (char *)(bwork + n);
    char query[32];
    if (cplx)
        ((cgees_fn *)fn)(&jobvs, &sort, NULL, &n, t->data, &lda, &sdim, wr, vectors ? vs->data : dummy, &ldvs,
                         query, &lwork, rwork, bwork, (int *)info->data);
    else
        ((gees_fn *)fn)(&jobvs, &sort, NULL, &n, t->data, &lda, &sdim, wr, wi, vectors ? vs->data : dummy, &ldvs,
                        query, &lwork, bwork, (int *)info->data);
    lwork = work_size(query, a->dtype);
    void *work = malloc((size_t)lwork * es);
    if (!work) { free(scratch); return OOM(frame); }
    for (int64_t b = 0; b < batch; b++) {
        char *tb = (char *)t->data + b * step, *vb = vectors ? (char *)vs->data + b * step : dummy;
        int *inf = (int *)info->data + b;
        if (!all_finite(tb, a->dtype, (int64_t)n * n)) *inf = -1000;
        else if (cplx)
            ((cgees_fn *)fn)(&jobvs, &sort, NULL, &n, tb, &lda, &sdim, wr, vb, &ldvs, work, &lwork, rwork, bwork, inf);
        else
            ((gees_fn *)fn)(&jobvs, &sort, NULL, &n, tb, &lda, &sdim, wr, wi, vb, &ldvs, work, &lwork, bwork, inf);
        if (*inf != 0) {
            fill_nan(tb, a->dtype, (int64_t)n * n);
            if (vectors) fill_nan(vb, a->dtype, (int64_t)n * n);
        }
    }
    free(work);
    free(scratch);
    return NULL;
}

/* ---- gehrd: a (..., n, n) -> (h (..., n, n), taus (..., n - 1), info): the upper Hessenberg form on and above the
 * first subdiagonal, the Householder vectors below it (their leading 1 implied), as LAPACK's gehrd leaves them
 * (ilo = 1, ihi = n: the whole matrix); a failed call fills the matrix's outputs with NaN, as JAX. ------------- */
static Ffi_Error *gehrd_handler(Ffi_CallFrame *frame) {
    ENTER(frame, 1, 3)
    Ffi_Buffer *a = ARG(frame, 0), *out = RET(frame, 0), *tau = RET(frame, 1), *info = RET(frame, 2);
    void *fn = NULL;
    Ffi_Error *err = routine_for(frame, R_GEHRD, a->dtype, &fn);
    if (err) return err;
    if (!matrix_ok(a, 1)) return malformed(frame, "gehrd");
    int64_t br = a->rank - 2, nn = a->dims[br], kk = nn > 0 ? nn - 1 : 0;
    if (!shaped(out, a->dtype, a, br, 2, nn, nn) || !shaped(tau, a->dtype, a, br, 1, kk, 0)
        || !shaped(info, FFI_S32, a, br, 0, 0, 0))
        return malformed(frame, "gehrd");
    int n = (int)nn, k = (int)kk, ilo = 1, ihi = n;
    int64_t batch = batch_of(a, 2);
    if (batch == 0) return NULL;
    size_t es = itemsize(a->dtype), step = (size_t)n * n * es;
    int lda = n > 1 ? n : 1, lwork = -1;
    if (out->data != a->data) memcpy(out->data, a->data, step * batch);
    if (n == 0) { memset(info->data, 0, batch * sizeof(int)); return NULL; }
    char query[32];
    ((gehrd_fn *)fn)(&n, &ilo, &ihi, out->data, &lda, tau->data, query, &lwork, (int *)info->data);
    lwork = work_size(query, a->dtype);
    void *work = malloc((size_t)lwork * es);
    if (!work) return OOM(frame);
    for (int64_t b = 0; b < batch; b++) {
        char *hb = (char *)out->data + b * step, *tb = (char *)tau->data + b * k * es;
        int *inf = (int *)info->data + b;
        ((gehrd_fn *)fn)(&n, &ilo, &ihi, hb, &lda, tb, work, &lwork, inf);
        if (*inf != 0) { fill_nan(hb, a->dtype, (int64_t)n * n); fill_nan(tb, a->dtype, k); }
    }
    free(work);
    return NULL;
}

/* ---- sytrd: a (..., n, n) -> (a' (..., n, n), d (..., n), e (..., n - 1), taus (..., n - 1), info): the reduction
 * of the symmetric (Hermitian: hetrd) a to tridiagonal form T = Q^H a Q, reading a's lower (lower=1) or upper
 * triangle; d and e are T's diagonal and off-diagonal (real, of a complex a too), the reflectors stay in a' below
 * (above) the off-diagonal, as LAPACK leaves them. A failed call fills its outputs with NaN, as JAX. ------------ */
static Ffi_Error *sytrd_handler(Ffi_CallFrame *frame) {
    ENTER(frame, 1, 5)
    Ffi_Buffer *a = ARG(frame, 0), *out = RET(frame, 0), *d = RET(frame, 1), *e = RET(frame, 2);
    Ffi_Buffer *tau = RET(frame, 3), *info = RET(frame, 4);
    void *fn = NULL;
    Ffi_Error *err = routine_for(frame, R_SYTRD, a->dtype, &fn);
    if (err) return err;
    if (!matrix_ok(a, 1)) return malformed(frame, "sytrd");
    int64_t br = a->rank - 2, nn = a->dims[br], kk = nn > 0 ? nn - 1 : 0;
    int rdt = real_of(a->dtype);
    if (!shaped(out, a->dtype, a, br, 2, nn, nn) || !shaped(d, rdt, a, br, 1, nn, 0)
        || !shaped(e, rdt, a, br, 1, kk, 0) || !shaped(tau, a->dtype, a, br, 1, kk, 0)
        || !shaped(info, FFI_S32, a, br, 0, 0, 0))
        return malformed(frame, "sytrd");
    int lower = (int)attr_int(frame, "lower", 1);
    int n = (int)nn, k = (int)kk;
    int64_t batch = batch_of(a, 2);
    if (batch == 0) return NULL;
    size_t es = itemsize(a->dtype), rs = itemsize(rdt), step = (size_t)n * n * es;
    char uplo = lower ? 'L' : 'U';
    int lda = n > 1 ? n : 1, lwork = -1;
    if (out->data != a->data) memcpy(out->data, a->data, step * batch);
    if (n == 0) { memset(info->data, 0, batch * sizeof(int)); return NULL; }
    char query[32];
    ((sytrd_fn *)fn)(&uplo, &n, out->data, &lda, d->data, e->data, tau->data, query, &lwork, (int *)info->data);
    lwork = work_size(query, a->dtype);
    void *work = malloc((size_t)lwork * es);
    if (!work) return OOM(frame);
    for (int64_t b = 0; b < batch; b++) {
        char *ab = (char *)out->data + b * step, *db = (char *)d->data + b * n * rs;
        char *eb = (char *)e->data + b * k * rs, *tb = (char *)tau->data + b * k * es;
        int *inf = (int *)info->data + b;
        ((sytrd_fn *)fn)(&uplo, &n, ab, &lda, db, eb, tb, work, &lwork, inf);
        if (*inf != 0) {
            fill_nan(ab, a->dtype, (int64_t)n * n);
            fill_nan(db, rdt, n);
            fill_nan(eb, rdt, k);
            fill_nan(tb, a->dtype, k);
        }
    }
    free(work);
    return NULL;
}

/* ---- ormqr: (reflectors (..., r, n), taus (..., k), c (..., p, q)) -> (Q c, Q^H c, c Q or c Q^H (..., p, q),
 * info): Q = H_1 ... H_k from the first k reflectors (k <= min(r, n)), applied without forming it (LAPACK's ormqr;
 * unmqr for complex: transpose=1 is the conjugate transpose); left=1 needs p == r, left=0 needs q == r. -------- */
static Ffi_Error *ormqr_handler(Ffi_CallFrame *frame) {
    ENTER(frame, 3, 2)
    Ffi_Buffer *a = ARG(frame, 0), *tau = ARG(frame, 1), *c = ARG(frame, 2), *out = RET(frame, 0);
    Ffi_Buffer *info = RET(frame, 1);
    void *fn = NULL;
    Ffi_Error *err = routine_for(frame, R_ORMQR, a->dtype, &fn);
    if (err) return err;
    int64_t left64 = attr_int(frame, "left", 1), trans64 = attr_int(frame, "transpose", 0);
    if (left64 < 0 || left64 > 1 || trans64 < 0 || trans64 > 1) return malformed(frame, "ormqr");
    if (!matrix_ok(a, 0) || !matrix_ok(c, 0) || tau->rank != a->rank - 1 || c->rank != a->rank)
        return malformed(frame, "ormqr");
    int64_t br = a->rank - 2, rr = a->dims[br], na = a->dims[br + 1], kk = tau->dims[br];
    int64_t pp = c->dims[br], qq = c->dims[br + 1];
    if (kk < 0 || kk > rr || kk > na || (left64 ? pp : qq) != rr || !shaped(tau, a->dtype, a, br, 1, kk, 0)
        || !shaped(c, a->dtype, a, br, 2, pp, qq) || !shaped(out, a->dtype, a, br, 2, pp, qq)
        || !shaped(info, FFI_S32, a, br, 0, 0, 0))
        return malformed(frame, "ormqr");
    int p = (int)pp, q = (int)qq, k = (int)kk, r = (int)rr;
    int64_t batch = batch_of(a, 2);
    if (batch == 0) return NULL;
    size_t es = itemsize(a->dtype), astep = (size_t)r * na * es, cstep = (size_t)p * q * es;
    char side = left64 ? 'L' : 'R', trans = trans64 ? (is_complex(a->dtype) ? 'C' : 'T') : 'N';
    int lda = r > 1 ? r : 1, ldc = p > 1 ? p : 1, lwork = -1;
    if (out->data != c->data) memcpy(out->data, c->data, cstep * batch);
    memset(info->data, 0, batch * sizeof(int));
    if (p == 0 || q == 0 || k == 0) return NULL;
    char query[32];
    ((ormqr_fn *)fn)(&side, &trans, &p, &q, &k, a->data, &lda, tau->data, out->data, &ldc, query, &lwork,
                     (int *)info->data);
    lwork = work_size(query, a->dtype);
    void *work = malloc((size_t)lwork * es);
    if (!work) return OOM(frame);
    for (int64_t b = 0; b < batch; b++) {
        char *ob = (char *)out->data + b * cstep;
        int *inf = (int *)info->data + b;
        ((ormqr_fn *)fn)(&side, &trans, &p, &q, &k, (char *)a->data + b * astep, &lda, (char *)tau->data + b * k * es,
                         ob, &ldc, work, &lwork, inf);
        if (*inf != 0) fill_nan(ob, a->dtype, (int64_t)p * q);
    }
    free(work);
    return NULL;
}

/* ---- Tridiagonal solves with the perturbation of tiny pivots (perturb_singular=True) ------------------------
 * Gaussian elimination with partial pivoting, as LAPACK's xLAGTF factors T (U has at most two superdiagonals) and
 * xLAGTS (job -1) solves: the forward substitution runs with the factorisation; in the back substitution a pivot
 * p with |p| < 1 that would overflow the row it divides (or is 0) is pushed away from 0 by perturb = eps *
 * max|U(i, j)| (doubled until it suffices, with p's sign), or, where |p| is below the safe minimum but the row is
 * small enough, p and the row are scaled up by 1 / safemin instead. So a singular T gives a finite (huge) solution,
 * as inverse iteration needs. One function per dtype, from one macro; all arrays are column-major, b and x (n,
 * nrhs), dl, d, du (n) with dl[0] and du[n - 1] unused. */
#define TRIDIAGONAL_PERTURBED(NAME, T, R, ABS, RE, EPS, RMIN, RMAX)                                                \
    static void NAME##_adjust(R perturb, T *pivot, T *row, int nrhs, int ld) {                                  \
        R safemin = (R)1 / RMAX < RMIN ? RMIN : ((R)1 / RMAX) * ((R)1 + EPS), bignum = (R)1 / safemin;          \
        R size = ABS(*pivot), largest = 0;                                                                       \
        if (size >= (R)1) return;                                                                                \
        perturb = copysign(fmax(fabs((double)perturb), (double)safemin), (double)RE(*pivot));                   \
        for (int j = 0; j < nrhs; j++) { R v = ABS(row[(size_t)j * ld]); if (v > largest) largest = v; }        \
        while (size < (R)1) {                                                                                    \
            if (size < safemin && size != 0 && largest * safemin <= size) {                                      \
                *pivot *= bignum;                                                                                \
                for (int j = 0; j < nrhs; j++) row[(size_t)j * ld] *= bignum;                                    \
                return;                                                                                          \
            }                                                                                                    \
            if (size >= safemin && largest <= size * bignum) return;                                             \
            *pivot += perturb;                                                                                   \
            perturb *= (R)2;                                                                                     \
            size = ABS(*pivot);                                                                                  \
        }                                                                                                        \
    }                                                                                                            \
    static void NAME(int n, int nrhs, const T *dl, const T *d, const T *du, const T *b, T *x, T *u, T *row) {    \
        /* u: U's diagonal u[i], first superdiagonal u[n + i], second u[2n + i]; row: one row of the rhs */       \
        if (n == 0) return;                                                                                      \
        T *u0 = u, *u1 = u + n, *u2 = u + 2 * (size_t)n;                                                         \
        for (int i = 0; i < 3 * n; i++) u[i] = 0;                                                                \
        if (n == 1) {                                                                                            \
            T p = d[0];                                                                                          \
            for (int j = 0; j < nrhs; j++) row[j] = b[(size_t)j * n];                                            \
            NAME##_adjust(EPS * ABS(p), &p, row, nrhs, 1);                                                       \
            for (int j = 0; j < nrhs; j++) x[(size_t)j * n] = row[j] / p;                                        \
            return;                                                                                              \
        }                                                                                                        \
        u0[0] = d[0];                                                                                            \
        u1[0] = du[0];                                                                                           \
        R largest = fmax(ABS(u0[0]), ABS(u1[0])), scale1 = ABS(u0[0]) + ABS(u1[0]);                             \
        for (int j = 0; j < nrhs; j++) x[(size_t)j * n] = b[(size_t)j * n];                                      \
        for (int k = 0; k + 1 < n; k++) {                                                                        \
            T sub = dl[k + 1];                                                                                   \
            u0[k + 1] = d[k + 1];                                                                                \
            R scale2 = ABS(sub) + ABS(u0[k + 1]) + (k + 2 < n ? ABS(du[k + 1]) : (R)0);                         \
            R piv1 = u0[k] == 0 ? (R)0 : ABS(u0[k]) / scale1, piv2 = ABS(sub) / scale2;                          \
            if (sub == 0 || piv2 <= piv1) { /* row k + 1 keeps its place: eliminate sub (if any) with row k */   \
                T f = sub == 0 ? (T)0 : sub / u0[k];                                                             \
                scale1 = scale2;                                                                                 \
                if (sub != 0) u0[k + 1] -= f * u1[k];                                                            \
                u1[k + 1] = du[k + 1];                                                                           \
                u2[k] = 0;                                                                                       \
                for (int j = 0; j < nrhs; j++) {                                                                 \
                    size_t o = (size_t)j * n;                                                                    \
                    x[o + k + 1] = sub == 0 ? b[o + k + 1] : b[o + k + 1] - f * x[o + k];                        \
                }                                                                                                \
            } else { /* rows k and k + 1 swap: row k + 1 (now first) eliminates the old row k */                \
                T f = u0[k] / sub, above = u1[k];                                                                \
                u0[k] = sub;                                                                                     \
                u0[k + 1] = above - f * d[k + 1];                                                                \
                u1[k] = d[k + 1];                                                                                \
                if (k + 2 < n) { u2[k] = du[k + 1]; u1[k + 1] = -f * du[k + 1]; }                               \
                for (int j = 0; j < nrhs; j++) {                                                                 \
                    size_t o = (size_t)j * n;                                                                    \
                    x[o + k + 1] = x[o + k] - f * b[o + k + 1];                                                  \
                    x[o + k] = b[o + k + 1];                                                                     \
                }                                                                                                \
                scale1 = ABS(u0[k + 1]) + ABS(u1[k + 1]);                                                        \
            }                                                                                                    \
            if (k + 2 < n) largest = fmax(largest, fmax(ABS(u0[k]), fmax(ABS(u1[k]), ABS(u2[k]))));             \
        }                                                                                                        \
        largest = fmax(largest, ABS(u0[n - 1]));                                                                 \
        R perturb = EPS * largest;                                                                               \
        for (int k = n - 1; k >= 0; k--) { /* back substitution, U x = z */                                      \
            T p = u0[k];                                                                                         \
            for (int j = 0; j < nrhs; j++) {                                                                     \
                size_t o = (size_t)j * n;                                                                        \
                T v = x[o + k];                                                                                  \
                if (k + 1 < n) v -= u1[k] * x[o + k + 1];                                                        \
                if (k + 2 < n) v -= u2[k] * x[o + k + 2];                                                        \
                row[j] = v;                                                                                      \
            }                                                                                                    \
            NAME##_adjust(perturb, &p, row, nrhs, 1);                                                            \
            T inverse = (T)1 / p;                                                                                \
            for (int j = 0; j < nrhs; j++) x[(size_t)j * n + k] = row[j] * inverse;                              \
        }                                                                                                        \
    }

#define RE_REAL(x) (x)
TRIDIAGONAL_PERTURBED(perturbed_f32, float, float, fabsf, RE_REAL, FLT_EPSILON, FLT_MIN, FLT_MAX)
TRIDIAGONAL_PERTURBED(perturbed_f64, double, double, fabs, RE_REAL, DBL_EPSILON, DBL_MIN, DBL_MAX)
TRIDIAGONAL_PERTURBED(perturbed_c64, float complex, float, cabsf, crealf, FLT_EPSILON, FLT_MIN, FLT_MAX)
TRIDIAGONAL_PERTURBED(perturbed_c128, double complex, double, cabs, creal, DBL_EPSILON, DBL_MIN, DBL_MAX)

/* ---- gtsv: (dl, d, du (..., n), b (..., n, nrhs)) -> (x (..., n, nrhs), info): the tridiagonal system T x = b,
 * T's subdiagonal dl[1:], diagonal d, superdiagonal du[:-1] (dl[0] and du[n - 1] are not read, as JAX); LAPACK's
 * gtsv (partial pivoting) on copies, a singular T (info > 0) giving NaN; perturb=1 runs the perturbed solver
 * above instead (never NaN for a singular T; info 0). -------------------------------------------------------- */
static Ffi_Error *gtsv_handler(Ffi_CallFrame *frame) {
    ENTER(frame, 4, 2)
    Ffi_Buffer *dl = ARG(frame, 0), *d = ARG(frame, 1), *du = ARG(frame, 2), *b = ARG(frame, 3);
    Ffi_Buffer *out = RET(frame, 0), *info = RET(frame, 1);
    void *fn = NULL;
    Ffi_Error *err = routine_for(frame, R_GTSV, b->dtype, &fn);
    if (err) return err;
    int64_t perturb64 = attr_int(frame, "perturb", 0);
    if (perturb64 < 0 || perturb64 > 1 || !matrix_ok(b, 0)) return malformed(frame, "gtsv");
    int64_t br = b->rank - 2, nn = b->dims[br], rr = b->dims[br + 1];
    if (!shaped(dl, b->dtype, b, br, 1, nn, 0) || !shaped(d, b->dtype, b, br, 1, nn, 0)
        || !shaped(du, b->dtype, b, br, 1, nn, 0) || !shaped(out, b->dtype, b, br, 2, nn, rr)
        || !shaped(info, FFI_S32, b, br, 0, 0, 0))
        return malformed(frame, "gtsv");
    int n = (int)nn, nrhs = (int)rr;
    int64_t batch = batch_of(b, 2);
    if (batch == 0) return NULL;
    size_t es = itemsize(b->dtype), vstep = (size_t)n * es, bstep = (size_t)n * nrhs * es;
    memset(info->data, 0, batch * sizeof(int));
    if (n == 0 || nrhs == 0) return NULL;
    if (perturb64) {
        char *scratch = malloc(3 * (size_t)n * es + (size_t)nrhs * es);
        if (!scratch) return OOM(frame);
        char *row = scratch + 3 * (size_t)n * es;
        for (int64_t k = 0; k < batch; k++) {
            const char *l = (char *)dl->data + k * vstep, *m = (char *)d->data + k * vstep;
            const char *u = (char *)du->data + k * vstep, *bb = (char *)b->data + k * bstep;
            char *x = (char *)out->data + k * bstep;
            switch (b->dtype) {
                case FFI_F32: perturbed_f32(n, nrhs, (const float *)l, (const float *)m, (const float *)u,
                                            (const float *)bb, (float *)x, (float *)scratch, (float *)row); break;
                case FFI_F64: perturbed_f64(n, nrhs, (const double *)l, (const double *)m, (const double *)u,
                                            (const double *)bb, (double *)x, (double *)scratch, (double *)row); break;
                case FFI_C64: perturbed_c64(n, nrhs, (const float complex *)l, (const float complex *)m,
                                            (const float complex *)u, (const float complex *)bb, (float complex *)x,
                                            (float complex *)scratch, (float complex *)row); break;
                default: perturbed_c128(n, nrhs, (const double complex *)l, (const double complex *)m,
                                        (const double complex *)u, (const double complex *)bb, (double complex *)x,
                                        (double complex *)scratch, (double complex *)row); break;
            }
        }
        free(scratch);
        return NULL;
    }
    char *copies = malloc(3 * (size_t)n * es); /* gtsv overwrites the three diagonals */
    if (!copies) return OOM(frame);
    if (out->data != b->data) memcpy(out->data, b->data, bstep * batch);
    int ldb = n;
    for (int64_t k = 0; k < batch; k++) {
        char *cl = copies, *cd = copies + vstep, *cu = copies + 2 * vstep;
        char *x = (char *)out->data + k * bstep;
        int *inf = (int *)info->data + k;
        memcpy(cl, (char *)dl->data + k * vstep, vstep);
        memcpy(cd, (char *)d->data + k * vstep, vstep);
        memcpy(cu, (char *)du->data + k * vstep, vstep);
        ((gtsv_fn *)fn)(&n, &nrhs, cl + es, cd, cu, x, &ldb, inf); /* (LAPACK's subdiagonal starts at dl[1]) */
        if (*inf != 0) fill_nan(x, b->dtype, (int64_t)n * nrhs);
    }
    free(copies);
    return NULL;
}

/* ---- the module: init(lapack_capi, blas_capi) and handlers() ------------------------------------------------ */
static const struct { int routine; int dtype; const char *name; int blas; } wanted[] = {
    {R_POTRF, FFI_F32, "spotrf", 0}, {R_POTRF, FFI_F64, "dpotrf", 0},
    {R_GETRF, FFI_F32, "sgetrf", 0}, {R_GETRF, FFI_F64, "dgetrf", 0},
    {R_GEQRF, FFI_F32, "sgeqrf", 0}, {R_GEQRF, FFI_F64, "dgeqrf", 0},
    {R_ORGQR, FFI_F32, "sorgqr", 0}, {R_ORGQR, FFI_F64, "dorgqr", 0},
    {R_SYEVD, FFI_F32, "ssyevd", 0}, {R_SYEVD, FFI_F64, "dsyevd", 0},
    {R_GESDD, FFI_F32, "sgesdd", 0}, {R_GESDD, FFI_F64, "dgesdd", 0},
    {R_TRSM, FFI_F32, "strsm", 1}, {R_TRSM, FFI_F64, "dtrsm", 1},
    {R_GEEV, FFI_F32, "sgeev", 0}, {R_GEEV, FFI_F64, "dgeev", 0},
    {R_GEES, FFI_F32, "sgees", 0}, {R_GEES, FFI_F64, "dgees", 0},
    /* complex rows (heevd, the complex gesdd, geev and gees are called through their own signatures) */
    {R_POTRF, FFI_C64, "cpotrf", 0}, {R_POTRF, FFI_C128, "zpotrf", 0},
    {R_GETRF, FFI_C64, "cgetrf", 0}, {R_GETRF, FFI_C128, "zgetrf", 0},
    {R_GEQRF, FFI_C64, "cgeqrf", 0}, {R_GEQRF, FFI_C128, "zgeqrf", 0},
    {R_ORGQR, FFI_C64, "cungqr", 0}, {R_ORGQR, FFI_C128, "zungqr", 0},
    {R_SYEVD, FFI_C64, "cheevd", 0}, {R_SYEVD, FFI_C128, "zheevd", 0},
    {R_GESDD, FFI_C64, "cgesdd", 0}, {R_GESDD, FFI_C128, "zgesdd", 0},
    {R_TRSM, FFI_C64, "ctrsm", 1}, {R_TRSM, FFI_C128, "ztrsm", 1},
    {R_GEEV, FFI_C64, "cgeev", 0}, {R_GEEV, FFI_C128, "zgeev", 0},
    {R_GEES, FFI_C64, "cgees", 0}, {R_GEES, FFI_C128, "zgees", 0},
    /* gesvd (SvdAlgorithm.QR), gehrd (hessenberg), sytrd/hetrd (tridiagonal), ormqr/unmqr, gtsv */
    {R_GESVD, FFI_F32, "sgesvd", 0}, {R_GESVD, FFI_F64, "dgesvd", 0},
    {R_GESVD, FFI_C64, "cgesvd", 0}, {R_GESVD, FFI_C128, "zgesvd", 0},
    {R_GEHRD, FFI_F32, "sgehrd", 0}, {R_GEHRD, FFI_F64, "dgehrd", 0},
    {R_GEHRD, FFI_C64, "cgehrd", 0}, {R_GEHRD, FFI_C128, "zgehrd", 0},
    {R_SYTRD, FFI_F32, "ssytrd", 0}, {R_SYTRD, FFI_F64, "dsytrd", 0},
    {R_SYTRD, FFI_C64, "chetrd", 0}, {R_SYTRD, FFI_C128, "zhetrd", 0},
    {R_ORMQR, FFI_F32, "sormqr", 0}, {R_ORMQR, FFI_F64, "dormqr", 0},
    {R_ORMQR, FFI_C64, "cunmqr", 0}, {R_ORMQR, FFI_C128, "zunmqr", 0},
    {R_GTSV, FFI_F32, "sgtsv", 0}, {R_GTSV, FFI_F64, "dgtsv", 0},
    {R_GTSV, FFI_C64, "cgtsv", 0}, {R_GTSV, FFI_C128, "zgtsv", 0},
};

static PyObject *init(PyObject *self, PyObject *args) {
    PyObject *lapack, *blas;
    if (!PyArg_ParseTuple(args, "O!O!", &PyDict_Type, &lapack, &PyDict_Type, &blas)) return NULL;
    for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++) {
        PyObject *capsule = PyDict_GetItemString(wanted[i].blas ? blas : lapack, wanted[i].name);
        if (capsule == NULL || !PyCapsule_CheckExact(capsule)) {
            PyErr_Format(PyExc_ImportError, "scipy's cython_%s has no %s", wanted[i].blas ? "blas" : "lapack",
                         wanted[i].name);
            return NULL;
        }
        void *p = PyCapsule_GetPointer(capsule, PyCapsule_GetName(capsule));
        if (p == NULL) return NULL;
        routines[wanted[i].routine][wanted[i].dtype] = p;
    }
    Py_RETURN_NONE;
}

static PyObject *handlers(PyObject *self, PyObject *unused) {
    static const Ffi_HandlerEntry table[] = {
        {"ember_lapack_potrf", (void *)potrf_handler}, {"ember_lapack_getrf", (void *)getrf_handler},
        {"ember_lapack_geqrf", (void *)geqrf_handler}, {"ember_lapack_orgqr", (void *)orgqr_handler},
        {"ember_lapack_syevd", (void *)syevd_handler}, {"ember_lapack_gesdd", (void *)gesdd_handler},
        {"ember_lapack_trsm", (void *)trsm_handler}, {"ember_lapack_geev", (void *)geev_handler},
        {"ember_lapack_gees", (void *)gees_handler}, {"ember_lapack_gesvd", (void *)gesvd_handler},
        {"ember_lapack_gehrd", (void *)gehrd_handler},
        {"ember_lapack_sytrd", (void *)sytrd_handler}, {"ember_lapack_ormqr", (void *)ormqr_handler},
        {"ember_lapack_gtsv", (void *)gtsv_handler},
    };
    return handler_dict(table, sizeof table / sizeof table[0]);
}

static PyMethodDef methods[] = {
    {"init", init, METH_VARARGS,
     "init(lapack_capi, blas_capi): take the routines from scipy's cython_lapack/cython_blas __pyx_capi__."},
    {"handlers", handlers, METH_NOARGS, "The FFI handlers: {custom-call target name: handler address}."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "ember._runtime._lapack",
    "ember's LAPACK kernels as XLA FFI handlers (see the comment at the top of _lapack.c).", -1, methods,
};

PyMODINIT_FUNC PyInit__lapack(void) { return PyModule_Create(&module_def); }
