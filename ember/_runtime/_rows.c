/* ember._runtime._rows: ember's CPU kernels as XLA FFI handlers (typed FFI, custom-call api_version 4): the fused row
 * kernel (ember_rows, below) and batched matrix products (ember_rows_bmm, "batched matrix products" further down).
 *
 * The CPU plugin's XLA writes a reduction over the last axis fed by elementwise work, and the elementwise work that
 * uses its result (softmax, layer norm, logsumexp, their gradients), as several loops that each read and write the
 * whole array. ember's lowering (ember/_hlo/row_fusion.py) instead hands such a region of the program to this
 * kernel as a small *row program*: the kernel runs it over a block of rows at a time, each value of the region a
 * row-sized buffer that stays in the cache, so the array is read once and the results written once.
 *
 * The call: `custom_call @ember_rows(program, inputs...) -> outputs...`, float32 throughout but the program:
 *   - program: int32[...]: [n_instructions, n_tmp_vectors, n_registers, n_literals, literals (float bits)...,
 *     instructions (6 words each: opcode, destination, a, b, c, sum)...];
 *   - the attributes `rows` (M) and `row` (N, the row length): an input or output of M * N elements is a matrix of
 *     M rows, one of M elements holds a scalar per row, one of N elements a row shared by all rows, one of 1 element
 *     a scalar.
 * A reference (destination, a, b, c, sum) is a kind (bits 28-31) and an index: a temporary row, an input or output
 * matrix, a shared row, a per-row register, a per-row input or output, a literal, a scalar input, or none (15).
 * An instruction computes per row: an elementwise op (unary, binary, or select: a != 0 ? b : c) whose result is a
 * row when a row is among its operands (else a scalar), a reduction of a row to a scalar, or a column reduction:
 * every row combined into one output row of n (sum, max, min: each thread combines its rows into its own partial
 * row, and the partials are combined in thread order after the threads end). An elementwise op with
 * a row result may also sum it into a scalar as it goes (sum), and then need not store it (destination none): a
 * pass fewer. Results equal XLA's ops' to rounding: square root is exact, a row divided by a scalar is multiplied
 * by its reciprocal (within 1 ulp), max/min propagate NaN, exp is a polynomial within 2 ulp with XLA's overflow and
 * underflow (inf, 0), sums add in their own order; booleans (is_finite, select's predicate) are 0.0 and 1.0.
 * The rows are split among threads (run_threads; a pool started on first use, see run_shares), each with its own
 * temporaries.
 *
 * The kernels run where the CPU has AVX-512F (the 16-lane forms) or else AVX2 with FMA (8-lane forms of the same
 * loops: "AVX2 + FMA" below), chosen once at run time (cpu_isa fills the table `kernels`); handlers() offers
 * nothing elsewhere, and the lowering keeps XLA's ops; errors (a malformed program, operands of the wrong size,
 * out of memory) come back as XLA_FFI_Error, never by aborting. */
#define _GNU_SOURCE /* (sched_getaffinity, CPU_COUNT) */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ffi_api.h"
#include "pool.h" /* the worker threads: run_shares, cpu_count, MAX_THREADS */

enum { K_TMP, K_IN, K_OUT, K_SHARED, K_REG, K_ROW_IN, K_ROW_OUT, K_LIT, K_SCALAR_IN, K_COL_OUT, K_NONE = 15 };
#define WIDTH 6 /* words per instruction: opcode, destination, a, b, c, sum */
enum {
    OP_NEG, OP_EXP, OP_LOG, OP_SQRT, OP_RSQRT, OP_ABS, OP_COPY, OP_SIGN, OP_ISFINITE, /* unary */
    OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_MAX, OP_MIN,                                     /* binary */
    OP_SELECT,                                                                          /* a ? b : c */
    OP_SUM, OP_RMAX, OP_RMIN,                                                           /* row -> scalar */
    OP_CSUM, OP_CMAX, OP_CMIN,                                                          /* rows -> one row */
    OP_COUNT
};
#define FIRST_BINARY OP_ADD
#define FIRST_REDUCTION OP_SUM
#define FIRST_COLUMN OP_CSUM
#define KIND(ref) ((int)((uint32_t)(ref) >> 28))
#define INDEX(ref) ((int64_t)((ref) & 0x0fffffff))
#define BLOCK 4096 /* elements per value per block of rows (a row longer than that is a block of one row) */
/* The longest row the kernel takes (the lowering's regions have rows of at most 65536: row_fusion.MAX_ROW); with it,
 * a worker's row values (n_tmp of at most BLOCK or MAX_ROW_LENGTH floats, n_tmp < 2^31) stay far below 2^63 bytes. */
#define MAX_ROW_LENGTH (1 << 20)

/* A reference resolved for one block of rows: element j of row r is at p[r * rs + j * cs]. */
typedef struct {
    float *p;
    int64_t rs, cs;
} Ref;

/* ---- scalar semantics (also the fallback of each op on scalars) ------------------------------------------ */
static inline float max_nan(float a, float b) { return (a != a || b != b) ? a + b : (a > b ? a : b); }
static inline float min_nan(float a, float b) { return (a != a || b != b) ? a + b : (a < b ? a : b); }

static inline float scalar_op(int op, float a, float b) {
    switch (op) {
        case OP_NEG: return -a;
        case OP_EXP: return expf(a);
        case OP_LOG: return logf(a);
        case OP_SQRT: return sqrtf(a);
        case OP_RSQRT: return 1.0f / sqrtf(a);
        case OP_ABS: return fabsf(a);
        case OP_COPY: return a;
        case OP_SIGN: return a > 0.0f ? 1.0f : a < 0.0f ? -1.0f : a; /* (zeros and NaN stay) */
        case OP_ISFINITE: return isfinite(a) ? 1.0f : 0.0f;          /* (a boolean is 0 or 1 here) */
        case OP_ADD: return a + b;
        case OP_SUB: return a - b;
        case OP_MUL: return a * b;
        case OP_DIV: return a / b;
        case OP_MAX: return max_nan(a, b);
        default: return min_nan(a, b);
    }
}

/* An elementwise op over a row one element at a time (d NULL: not stored; sum NULL: not summed). */
static void row_scalar(int op, float *d, const float *a, int64_t acs, const float *b, int64_t bcs, int64_t n,
                       float *sum) {
    float total = 0.0f;
    for (int64_t j = 0; j < n; j++) {
        float v = scalar_op(op, a[j * acs], b ? b[j * bcs] : 0.0f);
        if (d) d[j] = v;
        total += v;
    }
    if (sum) *sum = total;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define AVX512 __attribute__((target("avx512f")))

/* exp(x) = 2^n * p(r), n = round(x / ln 2), r = x - n ln 2 (ln 2 in two parts), p a degree-7 polynomial (Taylor
 * coefficients refined for float); scalef makes 2^n * p overflow to inf and underflow to 0 as exp does. */
AVX512 static inline __m512 exp16(__m512 x) {
    x = _mm512_min_ps(_mm512_set1_ps(89.0f), _mm512_max_ps(_mm512_set1_ps(-104.0f), x)); /* (NaN stays NaN) */
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

/* max/min that return NaN where either operand is NaN (as XLA's maximum/minimum; the instruction alone does not). */
AVX512 static inline __m512 nan_of(__m512 r, __m512 a, __m512 b) {
    __mmask16 nan = _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q);
    return _mm512_mask_add_ps(r, nan, a, b);
}

AVX512 static inline __m512 vector_op(int op, __m512 a, __m512 b) {
    switch (op) {
        case OP_NEG: return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(a), _mm512_set1_epi32(INT32_MIN)));
        case OP_EXP: return exp16(a);
        case OP_SQRT: return _mm512_sqrt_ps(a);
        case OP_RSQRT: return _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_sqrt_ps(a));
        case OP_ABS: return _mm512_abs_ps(a);
        case OP_COPY: return a;
        case OP_SIGN: { /* +-1 with a's sign where a is a nonzero number; zeros and NaN stay */
            __m512i sign = _mm512_and_si512(_mm512_castps_si512(a), _mm512_set1_epi32(INT32_MIN));
            __m512 one = _mm512_castsi512_ps(_mm512_or_si512(sign, _mm512_castps_si512(_mm512_set1_ps(1.0f))));
            return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, _mm512_setzero_ps(), _CMP_NEQ_OQ), a, one);
        }
        case OP_ISFINITE:
            return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(_mm512_abs_ps(a), _mm512_set1_ps(INFINITY), _CMP_LT_OQ),
                                       _mm512_set1_ps(1.0f));
        case OP_ADD: return _mm512_add_ps(a, b);
        case OP_SUB: return _mm512_sub_ps(a, b);
        case OP_MUL: return _mm512_mul_ps(a, b);
        case OP_DIV: return _mm512_div_ps(a, b);
        case OP_MAX: return nan_of(_mm512_max_ps(a, b), a, b);
        default: return nan_of(_mm512_min_ps(a, b), a, b);
    }
}

/* One elementwise op over a row of n elements, each operand a row (stride 1) or a scalar (stride 0), its result
 * stored (STORE) and/or summed into *sum (SUM); one loop per op, operand strides and variant, so that each is
 * compiled with its op inlined and its loads known. Four vectors per iteration (four independent sums). */
#define LOADS(OP, ACS, BCS, J) vector_op(OP, ACS ? _mm512_loadu_ps(a + (J)) : sa, BCS ? _mm512_loadu_ps(b + (J)) : sb)
#define ROW_LOOP(OP, ACS, BCS, STORE, SUM)                                                                      \
    {                                                                                                           \
        __m512 sa = _mm512_set1_ps(*a), sb = _mm512_set1_ps(b ? *b : 0.0f);                                    \
        __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;                                             \
        int64_t j = 0;                                                                                          \
        for (; j + 64 <= n; j += 64) {                                                                          \
            __m512 v0 = LOADS(OP, ACS, BCS, j), v1 = LOADS(OP, ACS, BCS, j + 16), v2 = LOADS(OP, ACS, BCS, j + 32),         \
                   v3 = LOADS(OP, ACS, BCS, j + 48);                                                                \
            if (STORE) {                                                                                        \
                _mm512_storeu_ps(d + j, v0);                                                                    \
                _mm512_storeu_ps(d + j + 16, v1);                                                               \
                _mm512_storeu_ps(d + j + 32, v2);                                                               \
                _mm512_storeu_ps(d + j + 48, v3);                                                               \
            }                                                                                                   \
            if (SUM) {                                                                                          \
                s0 = _mm512_add_ps(s0, v0);                                                                     \
                s1 = _mm512_add_ps(s1, v1);                                                                     \
                s2 = _mm512_add_ps(s2, v2);                                                                     \
                s3 = _mm512_add_ps(s3, v3);                                                                     \
            }                                                                                                   \
        }                                                                                                       \
        for (; j < n; j += 16) {                                                                                \
            __mmask16 k = n - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - j)) - 1);                  \
            __m512 v = vector_op(OP, ACS ? _mm512_maskz_loadu_ps(k, a + j) : sa,                                \
                                 BCS ? _mm512_maskz_loadu_ps(k, b + j) : sb);                                   \
            if (STORE) _mm512_mask_storeu_ps(d + j, k, v);                                                      \
            if (SUM) s0 = _mm512_mask_add_ps(s0, k, s0, v);                                                     \
        }                                                                                                       \
        if (SUM) *sum = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));      \
    }
#define VARIANTS(OP, ACS, BCS)                                                                                  \
    if (sum == NULL) ROW_LOOP(OP, ACS, BCS, 1, 0)                                                               \
    else if (d != NULL) ROW_LOOP(OP, ACS, BCS, 1, 1)                                                            \
    else ROW_LOOP(OP, ACS, BCS, 0, 1)
#define STRIDES(OP)                                                                                             \
    case OP:                                                                                                    \
        if (acs && bcs) VARIANTS(OP, 1, 1) else if (acs) VARIANTS(OP, 1, 0) else if (bcs) VARIANTS(OP, 0, 1)    \
        else VARIANTS(OP, 0, 0)                                                                                 \
        break;

/* d[j] = op(a[j], b[j]) for a row of n (d NULL: not stored), and *sum = their sum (sum NULL: not summed). */
AVX512 static void row_elementwise(int op, float *d, const float *a, int64_t acs, const float *b, int64_t bcs,
                                   int64_t n, float *sum) {
    if (b == NULL) bcs = 0;
    float reciprocal;
    if (op == OP_DIV && acs && !bcs) { /* a row divided by a scalar: times its reciprocal (vdivps is ~8x a vmulps) */
        reciprocal = 1.0f / *b;
        op = OP_MUL;
        b = &reciprocal;
    }
    switch (op) {
        STRIDES(OP_NEG) STRIDES(OP_EXP) STRIDES(OP_SQRT) STRIDES(OP_RSQRT) STRIDES(OP_ABS) STRIDES(OP_COPY)
        STRIDES(OP_SIGN) STRIDES(OP_ISFINITE)
        STRIDES(OP_ADD) STRIDES(OP_SUB) STRIDES(OP_MUL) STRIDES(OP_DIV) STRIDES(OP_MAX) STRIDES(OP_MIN)
        default: /* OP_LOG: no vector form (the lowering gives it scalars only); kept exact */
            row_scalar(op, d, a, acs, b, bcs, n, sum);
    }
}

/* d[j] = p[j] != 0 ? t[j] : f[j] for a row of n, each operand a row or a scalar (a select is seldom hot: one loop
 * with the strides read at run time). */
AVX512 static void row_select(float *d, const float *p, int64_t pcs, const float *t, int64_t tcs, const float *f,
                              int64_t fcs, int64_t n) {
    for (int64_t j = 0; j < n; j += 16) {
        __mmask16 k = n - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - j)) - 1);
        __m512 vp = pcs ? _mm512_maskz_loadu_ps(k, p + j) : _mm512_set1_ps(*p);
        __m512 vt = tcs ? _mm512_maskz_loadu_ps(k, t + j) : _mm512_set1_ps(*t);
        __m512 vf = fcs ? _mm512_maskz_loadu_ps(k, f + j) : _mm512_set1_ps(*f);
        __mmask16 take = _mm512_cmp_ps_mask(vp, _mm512_setzero_ps(), _CMP_NEQ_UQ);
        _mm512_mask_storeu_ps(d + j, k, _mm512_mask_blend_ps(take, vf, vt));
    }
}

/* A row's sum, max or min: four accumulators of 16 lanes (independent chains), combined by a tree; max and min
 * track NaN apart from the chains (any NaN in the row makes the result NaN, as XLA's reduce of maximum). */
#define REDUCE_LOOP(COMBINE, INIT)                                                                              \
    {                                                                                                           \
        __m512 s[4] = {INIT, INIT, INIT, INIT};                                                                 \
        int64_t j = 0;                                                                                          \
        for (; j + 64 <= n; j += 64)                                                                            \
            for (int u = 0; u < 4; u++) {                                                                       \
                __m512 x = _mm512_loadu_ps(a + j + 16 * u);                                                     \
                nan |= _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);                                                  \
                s[u] = COMBINE(s[u], x);                                                                        \
            }                                                                                                   \
        for (int u = 0; j < n; j += 16, u++) {                                                                  \
            __mmask16 k = n - j >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - j)) - 1);                  \
            __m512 x = _mm512_mask_loadu_ps(INIT, k, a + j);                                                    \
            nan |= _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);                                                      \
            s[u] = COMBINE(s[u], x);                                                                            \
        }                                                                                                       \
        acc = COMBINE(COMBINE(s[0], s[1]), COMBINE(s[2], s[3]));                                                \
    }

/* A row's sum in 64 lanes (four vectors of 16). */
AVX512 static __m512 sum_lanes(const float *a, int64_t n) {
    __mmask16 nan = 0;
    __m512 acc;
    REDUCE_LOOP(_mm512_add_ps, _mm512_setzero_ps())
    (void)nan;
    return acc;
}

/* A sum's blocks: each summed in 64 lanes, the blocks' lane sums then added, so that a lane adds at most
 * SUM_BLOCK / 64 terms and then n / SUM_BLOCK block sums (a row of 65536: 80 terms a lane, not 1024: as accurate
 * as XLA's reduce). */
#define SUM_BLOCK 1024

AVX512 static float row_reduce(int op, const float *a, int64_t n) {
    __mmask16 nan = 0;
    __m512 acc;
    if (op == OP_SUM) {
        __m512 total = _mm512_setzero_ps();
        for (int64_t b = 0; b < n; b += SUM_BLOCK)
            total = _mm512_add_ps(total, sum_lanes(a + b, n - b < SUM_BLOCK ? n - b : SUM_BLOCK));
        return _mm512_reduce_add_ps(total);
    }
    if (op == OP_RMAX) {
        REDUCE_LOOP(_mm512_max_ps, _mm512_set1_ps(-INFINITY))
        return nan ? NAN : _mm512_reduce_max_ps(acc);
    }
    REDUCE_LOOP(_mm512_min_ps, _mm512_set1_ps(INFINITY))
    return nan ? NAN : _mm512_reduce_min_ps(acc);
}


/* ---- AVX2 + FMA (CPUs without AVX-512F: AMD Zen 1-3, Intel before Skylake-X and its client parts) ----------------
 * The same kernels on 8 lanes, chosen at run time (cpu_supported fills `kernels`); each follows its AVX-512 form
 * above (same polynomial, same order of additions per lane), with masked tails by integer masks (vmaskmovps). */
#define AVX2 __attribute__((target("avx2,fma")))

/* lane_mask[8 - left .. 16 - left): the first `left` (0..8) lanes of a vector. */
static const int32_t lane_mask[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
AVX2 static inline __m256i first_lanes(int64_t left) {
    return _mm256_loadu_si256((const __m256i *)(lane_mask + 8 - (left < 8 ? left : 8)));
}

/* exp16's polynomial on 8 lanes. AVX2 has no scalef: 2^n (n in [-150, 128] after the clamp) is built from exponent
 * bits as 2^(n >> 1) * 2^(n - (n >> 1)), two factors in [2^-75, 2^64] that are normal floats, so p * 2^n rounds once
 * (at the second product) and overflows to inf / underflows to 0 where scalef does; a NaN x gives a NaN p, whatever
 * the factors' bits. */
AVX2 static inline __m256 exp8(__m256 x) {
    x = _mm256_min_ps(_mm256_set1_ps(89.0f), _mm256_max_ps(_mm256_set1_ps(-104.0f), x)); /* (NaN stays NaN) */
    __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_cvtps_epi32(n), e1 = _mm256_srai_epi32(e, 1), e2 = _mm256_sub_epi32(e, e1);
    __m256 f1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e1, _mm256_set1_epi32(127)), 23));
    __m256 f2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e2, _mm256_set1_epi32(127)), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, f1), f2);
}

AVX2 static inline __m256 nan_of8(__m256 r, __m256 a, __m256 b) {
    return _mm256_blendv_ps(r, _mm256_add_ps(a, b), _mm256_cmp_ps(a, b, _CMP_UNORD_Q));
}

AVX2 static inline __m256 vector_op8(int op, __m256 a, __m256 b) {
    const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MIN));
    switch (op) {
        case OP_NEG: return _mm256_xor_ps(a, sign);
        case OP_EXP: return exp8(a);
        case OP_SQRT: return _mm256_sqrt_ps(a);
        case OP_RSQRT: return _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_sqrt_ps(a));
        case OP_ABS: return _mm256_andnot_ps(sign, a);
        case OP_COPY: return a;
        case OP_SIGN: { /* +-1 with a's sign where a is a nonzero number; zeros and NaN stay */
            __m256 one = _mm256_or_ps(_mm256_and_ps(a, sign), _mm256_set1_ps(1.0f));
            return _mm256_blendv_ps(a, one, _mm256_cmp_ps(a, _mm256_setzero_ps(), _CMP_NEQ_OQ));
        }
        case OP_ISFINITE:
            return _mm256_and_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, a), _mm256_set1_ps(INFINITY), _CMP_LT_OQ),
                                 _mm256_set1_ps(1.0f));
        case OP_ADD: return _mm256_add_ps(a, b);
        case OP_SUB: return _mm256_sub_ps(a, b);
        case OP_MUL: return _mm256_mul_ps(a, b);
        case OP_DIV: return _mm256_div_ps(a, b);
        case OP_MAX: return nan_of8(_mm256_max_ps(a, b), a, b);
        default: return nan_of8(_mm256_min_ps(a, b), a, b);
    }
}

/* The 16-lane vector the AVX-512 form's four accumulators would hold, from eight of 8 lanes (lane l of s[u] sums
 * the elements 8u + l mod 64, those of AVX-512 lane 8 (u & 1) + l), then summed as _mm512_reduce_add_ps does. */
AVX2 static inline float hsum8(__m256 v) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}
#define FOLD8(LO, HI) /* (of the accumulators s0 .. s7) */                                                  \
    __m256 LO = _mm256_add_ps(_mm256_add_ps(s0, s2), _mm256_add_ps(s4, s6));                                  \
    __m256 HI = _mm256_add_ps(_mm256_add_ps(s1, s3), _mm256_add_ps(s5, s7));

/* ROW_LOOP on 8 lanes: eight vectors per iteration, eight sums (64 lanes in all, as the AVX-512 loop's four of 16,
 * so a lane adds as many terms); the tail's vectors go to s0 and s1 in turn (the AVX-512 tail's lanes: its s0).
 * The accumulators are named variables, indexed by constants only, so that they stay in registers (an array
 * indexed at run time was kept on the stack and zeroed by rep stos: 30% of the time of rows of 16). */
#define LOADS8(OP, ACS, BCS, J) vector_op8(OP, ACS ? _mm256_loadu_ps(a + (J)) : sa, BCS ? _mm256_loadu_ps(b + (J)) : sb)
#define STEP8(OP, ACS, BCS, STORE, SUM, J, ACC)                                                                 \
    {                                                                                                           \
        __m256 v = LOADS8(OP, ACS, BCS, J);                                                                     \
        if (STORE) _mm256_storeu_ps(d + (J), v);                                                                \
        if (SUM) ACC = _mm256_add_ps(ACC, v);                                                                   \
    }
#define TAIL8(OP, ACS, BCS, STORE, SUM, J, ACC)                                                                 \
    if (n - (J) >= 8) STEP8(OP, ACS, BCS, STORE, SUM, J, ACC)                                                   \
    else if ((J) < n) {                                                                                         \
        __m256i k = first_lanes(n - (J));                                                                       \
        __m256 v = vector_op8(OP, ACS ? _mm256_maskload_ps(a + (J), k) : sa,                                    \
                              BCS ? _mm256_maskload_ps(b + (J), k) : sb);                                       \
        if (STORE) _mm256_maskstore_ps(d + (J), k, v);                                                          \
        if (SUM) ACC = _mm256_add_ps(ACC, _mm256_and_ps(v, _mm256_castsi256_ps(k)));                            \
    }
#define ROW_LOOP8(OP, ACS, BCS, STORE, SUM)                                                                     \
    {                                                                                                           \
        __m256 sa = _mm256_set1_ps(*a), sb = _mm256_set1_ps(b ? *b : 0.0f);                                    \
        __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;         \
        int64_t j = 0;                                                                                          \
        for (; j + 64 <= n; j += 64) {                                                                          \
            STEP8(OP, ACS, BCS, STORE, SUM, j, s0) STEP8(OP, ACS, BCS, STORE, SUM, j + 8, s1)                   \
            STEP8(OP, ACS, BCS, STORE, SUM, j + 16, s2) STEP8(OP, ACS, BCS, STORE, SUM, j + 24, s3)             \
            STEP8(OP, ACS, BCS, STORE, SUM, j + 32, s4) STEP8(OP, ACS, BCS, STORE, SUM, j + 40, s5)             \
            STEP8(OP, ACS, BCS, STORE, SUM, j + 48, s6) STEP8(OP, ACS, BCS, STORE, SUM, j + 56, s7)             \
        }                                                                                                       \
        for (; j < n; j += 16) {                                                                                \
            TAIL8(OP, ACS, BCS, STORE, SUM, j, s0)                                                              \
            TAIL8(OP, ACS, BCS, STORE, SUM, j + 8, s1)                                                          \
        }                                                                                                       \
        if (SUM) {                                                                                              \
            FOLD8(lo, hi)                                                                                       \
            *sum = hsum8(_mm256_add_ps(lo, hi));                                                                \
        }                                                                                                       \
    }
#define VARIANTS8(OP, ACS, BCS)                                                                                 \
    if (sum == NULL) ROW_LOOP8(OP, ACS, BCS, 1, 0)                                                              \
    else if (d != NULL) ROW_LOOP8(OP, ACS, BCS, 1, 1)                                                           \
    else ROW_LOOP8(OP, ACS, BCS, 0, 1)
#define STRIDES8(OP)                                                                                            \
    case OP:                                                                                                    \
        if (acs && bcs) VARIANTS8(OP, 1, 1) else if (acs) VARIANTS8(OP, 1, 0) else if (bcs) VARIANTS8(OP, 0, 1) \
        else VARIANTS8(OP, 0, 0)                                                                                \
        break;

AVX2 static void row_elementwise_avx2(int op, float *d, const float *a, int64_t acs, const float *b, int64_t bcs,
                                      int64_t n, float *sum) {
    if (b == NULL) bcs = 0;
    float reciprocal;
    if (op == OP_DIV && acs && !bcs) { /* (as row_elementwise) */
        reciprocal = 1.0f / *b;
        op = OP_MUL;
        b = &reciprocal;
    }
    switch (op) {
        STRIDES8(OP_NEG) STRIDES8(OP_EXP) STRIDES8(OP_SQRT) STRIDES8(OP_RSQRT) STRIDES8(OP_ABS) STRIDES8(OP_COPY)
        STRIDES8(OP_SIGN) STRIDES8(OP_ISFINITE)
        STRIDES8(OP_ADD) STRIDES8(OP_SUB) STRIDES8(OP_MUL) STRIDES8(OP_DIV) STRIDES8(OP_MAX) STRIDES8(OP_MIN)
        default:
            row_scalar(op, d, a, acs, b, bcs, n, sum);
    }
}

AVX2 static void row_select_avx2(float *d, const float *p, int64_t pcs, const float *t, int64_t tcs, const float *f,
                                 int64_t fcs, int64_t n) {
    for (int64_t j = 0; j < n; j += 8) {
        __m256i k = first_lanes(n - j);
        __m256 vp = pcs ? _mm256_maskload_ps(p + j, k) : _mm256_set1_ps(*p);
        __m256 vt = tcs ? _mm256_maskload_ps(t + j, k) : _mm256_set1_ps(*t);
        __m256 vf = fcs ? _mm256_maskload_ps(f + j, k) : _mm256_set1_ps(*f);
        __m256 take = _mm256_cmp_ps(vp, _mm256_setzero_ps(), _CMP_NEQ_UQ);
        _mm256_maskstore_ps(d + j, k, _mm256_blendv_ps(vf, vt, take));
    }
}

/* REDUCE_LOOP on 8 lanes: eight accumulators s0 .. s7 (64 lanes, as the AVX-512 loop's; named, to stay in
 * registers), the tail's vectors into s0, s1, ... in turn; NaN tracked in a vector of flags. */
#define REDUCE_STEP8(COMBINE, INIT, J, ACC)                                                                     \
    if ((J) < n) {                                                                                              \
        __m256 x = n - (J) >= 8 ? _mm256_loadu_ps(a + (J))                                                      \
                                : _mm256_blendv_ps(INIT, _mm256_maskload_ps(a + (J), first_lanes(n - (J))),     \
                                                   _mm256_castsi256_ps(first_lanes(n - (J))));                  \
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));                                             \
        ACC = COMBINE(ACC, x);                                                                                  \
    }
#define REDUCE_LOOP8(COMBINE, INIT)                                                                             \
    __m256 s0 = INIT, s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;                            \
    {                                                                                                           \
        int64_t j = 0;                                                                                          \
        for (; j + 64 <= n; j += 64) {                                                                          \
            __m256 x0 = _mm256_loadu_ps(a + j), x1 = _mm256_loadu_ps(a + j + 8), x2 = _mm256_loadu_ps(a + j + 16), \
                   x3 = _mm256_loadu_ps(a + j + 24), x4 = _mm256_loadu_ps(a + j + 32),                          \
                   x5 = _mm256_loadu_ps(a + j + 40), x6 = _mm256_loadu_ps(a + j + 48),                          \
                   x7 = _mm256_loadu_ps(a + j + 56);                                                            \
            nan = _mm256_or_ps(nan, _mm256_or_ps(_mm256_or_ps(_mm256_cmp_ps(x0, x1, _CMP_UNORD_Q),              \
                                                              _mm256_cmp_ps(x2, x3, _CMP_UNORD_Q)),             \
                                                 _mm256_or_ps(_mm256_cmp_ps(x4, x5, _CMP_UNORD_Q),              \
                                                              _mm256_cmp_ps(x6, x7, _CMP_UNORD_Q))));           \
            s0 = COMBINE(s0, x0); s1 = COMBINE(s1, x1); s2 = COMBINE(s2, x2); s3 = COMBINE(s3, x3);             \
            s4 = COMBINE(s4, x4); s5 = COMBINE(s5, x5); s6 = COMBINE(s6, x6); s7 = COMBINE(s7, x7);             \
        }                                                                                                       \
        REDUCE_STEP8(COMBINE, INIT, j, s0) REDUCE_STEP8(COMBINE, INIT, j + 8, s1)                               \
        REDUCE_STEP8(COMBINE, INIT, j + 16, s2) REDUCE_STEP8(COMBINE, INIT, j + 24, s3)                         \
        REDUCE_STEP8(COMBINE, INIT, j + 32, s4) REDUCE_STEP8(COMBINE, INIT, j + 40, s5)                         \
        REDUCE_STEP8(COMBINE, INIT, j + 48, s6) REDUCE_STEP8(COMBINE, INIT, j + 56, s7)                         \
    }

/* sum_lanes on 8 lanes: a block's 64 lane sums, folded into the AVX-512 form's 16 (lo: its lanes 0-7, hi: 8-15). */
AVX2 static inline void sum_lanes_avx2(const float *a, int64_t n, __m256 *l, __m256 *h) {
    __m256 nan = _mm256_setzero_ps();
    REDUCE_LOOP8(_mm256_add_ps, _mm256_setzero_ps())
    (void)nan;
    FOLD8(lo, hi)
    *l = lo;
    *h = hi;
}

AVX2 static float row_reduce_avx2(int op, const float *a, int64_t n) {
    __m256 nan = _mm256_setzero_ps(), acc;
    if (op == OP_SUM) { /* (SUM_BLOCK blocks, as row_reduce) */
        __m256 lo = _mm256_setzero_ps(), hi = lo;
        for (int64_t b = 0; b < n; b += SUM_BLOCK) {
            __m256 l, h;
            sum_lanes_avx2(a + b, n - b < SUM_BLOCK ? n - b : SUM_BLOCK, &l, &h);
            lo = _mm256_add_ps(lo, l);
            hi = _mm256_add_ps(hi, h);
        }
        return hsum8(_mm256_add_ps(lo, hi));
    }
    if (op == OP_RMAX) {
        REDUCE_LOOP8(_mm256_max_ps, _mm256_set1_ps(-INFINITY))
        acc = _mm256_max_ps(_mm256_max_ps(_mm256_max_ps(s0, s1), _mm256_max_ps(s2, s3)),
                            _mm256_max_ps(_mm256_max_ps(s4, s5), _mm256_max_ps(s6, s7)));
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        h = _mm_max_ss(h, _mm_movehdup_ps(h));
        return _mm256_movemask_ps(nan) ? NAN : _mm_cvtss_f32(h);
    }
    REDUCE_LOOP8(_mm256_min_ps, _mm256_set1_ps(INFINITY))
    acc = _mm256_min_ps(_mm256_min_ps(_mm256_min_ps(s0, s1), _mm256_min_ps(s2, s3)),
                        _mm256_min_ps(_mm256_min_ps(s4, s5), _mm256_min_ps(s6, s7)));
    __m128 h = _mm_min_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    h = _mm_min_ps(h, _mm_movehl_ps(h, h));
    h = _mm_min_ss(h, _mm_movehdup_ps(h));
    return _mm256_movemask_ps(nan) ? NAN : _mm_cvtss_f32(h);
}

/* MICRO on 8 lanes: c[rows, n] = a[rows, k] . b[k, n] for rows <= 6, 6 x 16 blocks (12 accumulators, two vectors of b
 * and a broadcast: 15 of the 16 registers); full columns by plain loads and stores, the last partial by masks. */
#define MICRO8(ROWS)                                                                                            \
    for (int64_t j = 0; j < n; j += 16) {                                                                       \
        int64_t left = n - j;                                                                                   \
        __m256i k0 = first_lanes(left), k1 = first_lanes(left > 8 ? left - 8 : 0);                             \
        __m256 acc[ROWS][2];                                                                                    \
        for (int r = 0; r < ROWS; r++) acc[r][0] = acc[r][1] = _mm256_setzero_ps();                             \
        if (left >= 16)                                                                                         \
            for (int64_t p = 0; p < k; p++) {                                                                   \
                __m256 b0 = _mm256_loadu_ps(b + p * n + j), b1 = _mm256_loadu_ps(b + p * n + j + 8);            \
                for (int r = 0; r < ROWS; r++) {                                                                \
                    __m256 ar = _mm256_broadcast_ss(a + r * k + p);                                             \
                    acc[r][0] = _mm256_fmadd_ps(ar, b0, acc[r][0]);                                             \
                    acc[r][1] = _mm256_fmadd_ps(ar, b1, acc[r][1]);                                             \
                }                                                                                               \
            }                                                                                                   \
        else                                                                                                    \
            for (int64_t p = 0; p < k; p++) {                                                                   \
                __m256 b0 = _mm256_maskload_ps(b + p * n + j, k0), b1 = _mm256_maskload_ps(b + p * n + j + 8, k1); \
                for (int r = 0; r < ROWS; r++) {                                                                \
                    __m256 ar = _mm256_broadcast_ss(a + r * k + p);                                             \
                    acc[r][0] = _mm256_fmadd_ps(ar, b0, acc[r][0]);                                             \
                    acc[r][1] = _mm256_fmadd_ps(ar, b1, acc[r][1]);                                             \
                }                                                                                               \
            }                                                                                                   \
        for (int r = 0; r < ROWS; r++) {                                                                        \
            if (left >= 16) {                                                                                   \
                _mm256_storeu_ps(c + r * n + j, acc[r][0]);                                                     \
                _mm256_storeu_ps(c + r * n + j + 8, acc[r][1]);                                                 \
            } else {                                                                                            \
                _mm256_maskstore_ps(c + r * n + j, k0, acc[r][0]);                                              \
                _mm256_maskstore_ps(c + r * n + j + 8, k1, acc[r][1]);                                          \
            }                                                                                                   \
        }                                                                                                       \
    }

AVX2 static void micro6_avx2(const float *a, const float *b, float *c, int64_t n, int64_t k) { MICRO8(6) }
AVX2 static void micro1_avx2(const float *a, const float *b, float *c, int64_t n, int64_t k) { MICRO8(1) }

AVX2 static void gemm_rows_avx2(const float *a, const float *b, float *c, int64_t m, int64_t n, int64_t k) {
    int64_t i = 0;
    for (; i + 6 <= m; i += 6) micro6_avx2(a + i * k, b, c + i * n, n, k);
    for (; i < m; i++) micro1_avx2(a + i * k, b, c + i * n, n, k);
}

/* 8 rows of 8 floats at src (stride ss elements) transposed into dst (stride ds elements): 32-bit pairs unpacked,
 * then 64-bit pairs (each 128-bit lane of b[4g + e] then holds element e of its four columns of rows 4g .. 4g + 3,
 * per half), then the 128-bit halves of rows i and i + 4 exchanged. */
AVX2 static void transpose8(const float *src, int64_t ss, float *dst, int64_t ds) {
    __m256 r[8], a[8], b[8];
    for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(src + i * ss);
    for (int i = 0; i < 8; i += 2) {
        a[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        a[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        b[i] = _mm256_shuffle_ps(a[i], a[i + 2], 0x44);
        b[i + 1] = _mm256_shuffle_ps(a[i], a[i + 2], 0xee);
        b[i + 2] = _mm256_shuffle_ps(a[i + 1], a[i + 3], 0x44);
        b[i + 3] = _mm256_shuffle_ps(a[i + 1], a[i + 3], 0xee);
    }
    for (int i = 0; i < 4; i++) {
        _mm256_storeu_ps(dst + i * ds, _mm256_permute2f128_ps(b[i], b[i + 4], 0x20));
        _mm256_storeu_ps(dst + (i + 4) * ds, _mm256_permute2f128_ps(b[i], b[i + 4], 0x31));
    }
}

static unsigned int get_control(void) { return _mm_getcsr(); }
static void set_control(unsigned int csr) { _mm_setcsr(csr); }
#else
/* Built for another architecture or compiler: the plain loops below let the module build, and no
 * handler is registered (handlers() is empty: cpu_supported() is 0), so they never run; the lowering then writes
 * XLA's own ops (tests/test_backend_forms.py's test_without_the_row_kernel_programs_lower_to_xla, and
 * tests/test_reduction_accuracy.py without the kernel, run everywhere). */
static unsigned int get_control(void) { return 0; }
static void set_control(unsigned int csr) { (void)csr; }
static void row_select(float *d, const float *p, int64_t pcs, const float *t, int64_t tcs, const float *f,
                       int64_t fcs, int64_t n) {
    for (int64_t j = 0; j < n; j++) d[j] = p[j * pcs] != 0.0f ? t[j * tcs] : f[j * fcs];
}
static void row_elementwise(int op, float *d, const float *a, int64_t acs, const float *b, int64_t bcs,
                            int64_t n, float *sum) {
    row_scalar(op, d, a, acs, b, bcs, n, sum);
}
static float row_reduce(int op, const float *a, int64_t n) {
    float r = op == OP_SUM ? 0.0f : op == OP_RMAX ? -INFINITY : INFINITY;
    for (int64_t j = 0; j < n; j++) r = op == OP_SUM ? r + a[j] : scalar_op(op == OP_RMAX ? OP_MAX : OP_MIN, r, a[j]);
    return r;
}
#endif

/* The kernels the handlers call, chosen once by cpu_supported() (before handlers() offers any handler): the AVX-512F
 * forms where the CPU has AVX-512F, else the AVX2 + FMA forms; `block` is the side of the transposes' register
 * blocks (16 or 8 floats). */
typedef struct {
    void (*elementwise)(int op, float *d, const float *a, int64_t acs, const float *b, int64_t bcs, int64_t n,
                        float *sum);
    void (*select)(float *d, const float *p, int64_t pcs, const float *t, int64_t tcs, const float *f, int64_t fcs,
                   int64_t n);
    float (*reduce)(int op, const float *a, int64_t n);
    void (*gemm)(const float *a, const float *b, float *c, int64_t m, int64_t n, int64_t k);
    void (*transpose)(const float *src, int64_t ss, float *dst, int64_t ds);
    int64_t block;
} Kernels;
static Kernels kernels;

/* ---- the handler ----------------------------------------------------------------------------------------- */
typedef struct {
    int64_t m, n, rows;            /* rows, row length, rows per block */
    int64_t n_inputs, n_outputs;
    float **inputs, **outputs;     /* the operand buffers (inputs[0] is the first after the program) */
    int64_t *in_size, *out_size;   /* their element counts */
    float *tmp, *regs;             /* a worker's row values: n_tmp of rows * n floats, n_regs of rows */
    const float *lits;
    const int32_t *code;           /* the instructions */
    int64_t n_instr, n_tmp, n_regs, n_lits;
    int64_t begin, end;            /* the rows this worker runs */
    unsigned int csr;              /* the calling thread's floating-point control (x86: MXCSR) */
    float *columns;                /* a worker's partial column reductions: n per output (used by K_COL_OUT), then
                                      the levels of the sums' cascades (n_outputs * n floats each) */
    int8_t *column_op;             /* per output: the column op accumulating it, -1 for none */
} Frame;

/* A temporary row block's size in floats: its rows, and STAGGER floats more, so that the temporaries do not lie a
 * multiple of 4096 bytes apart (loads from one and stores to another at such distances falsely depend on each
 * other, "4K aliasing": 2x the time of a pass over rows of 1024 measured). */
#define STAGGER 48
#define TMP_SIZE(f) ((f)->rows * (f)->n + STAGGER)

/* Resolve a reference for the block starting at row r0; 0 if it is malformed (also checks the operand sizes). */
static int resolve(const Frame *f, int32_t ref, int64_t r0, Ref *out) {
    int64_t i = INDEX(ref), m = f->m, n = f->n, n_tmp = f->n_tmp, n_regs = f->n_regs, n_lits = f->n_lits;
    switch (KIND(ref)) {
        case K_TMP: if (i >= n_tmp) return 0; *out = (Ref){f->tmp + i * TMP_SIZE(f), n, 1}; return 1;
        case K_IN: if (i >= f->n_inputs || f->in_size[i] != m * n) return 0;
            *out = (Ref){f->inputs[i] + r0 * n, n, 1}; return 1;
        case K_OUT: if (i >= f->n_outputs || f->out_size[i] != m * n) return 0;
            *out = (Ref){f->outputs[i] + r0 * n, n, 1}; return 1;
        case K_SHARED: if (i >= f->n_inputs || f->in_size[i] != n) return 0;
            *out = (Ref){f->inputs[i], 0, 1}; return 1;
        case K_REG: if (i >= n_regs) return 0; *out = (Ref){f->regs + i * f->rows, 1, 0}; return 1;
        case K_ROW_IN: if (i >= f->n_inputs || f->in_size[i] != m) return 0;
            *out = (Ref){f->inputs[i] + r0, 1, 0}; return 1;
        case K_ROW_OUT: if (i >= f->n_outputs || f->out_size[i] != m) return 0;
            *out = (Ref){f->outputs[i] + r0, 1, 0}; return 1;
        case K_LIT: if (i >= n_lits) return 0; *out = (Ref){(float *)f->lits + i, 0, 0}; return 1;
        case K_SCALAR_IN: if (i >= f->n_inputs || f->in_size[i] != 1) return 0;
            *out = (Ref){f->inputs[i], 0, 0}; return 1;
        case K_NONE: *out = (Ref){NULL, 0, 1}; return 1; /* (a result not stored) */
        case K_COL_OUT: if (i >= f->n_outputs || f->out_size[i] != n) return 0; /* (this worker's partial) */
            *out = (Ref){f->columns ? f->columns + i * n : NULL, 0, 1}; return 1;
        default: return 0;
    }
}

static int writable(int32_t ref) {
    int kind = KIND(ref);
    return kind == K_TMP || kind == K_OUT || kind == K_REG || kind == K_ROW_OUT || kind == K_COL_OUT;
}

/* The elementwise op combining a column reduction's rows, and its identity. */
static int column_combine(int op) { return op == OP_CSUM ? OP_ADD : op == OP_CMAX ? OP_MAX : OP_MIN; }
static float column_identity(int op) { return op == OP_CSUM ? 0.0f : op == OP_CMAX ? -INFINITY : INFINITY; }

/* A column sum adds its rows in a cascade (as a pairwise sum is accurate): each row into level 0, level 0 into
 * level 1 every CASCADE rows, level 1 into level 2 every CASCADE^2 rows, and so on (each level a row of n floats,
 * LEVELS in all, `level` floats apart), so a result is a sum of at most ~CASCADE terms per level, not of every row
 * one after another (f32[25088, 64]: 20x less accurate than XLA's reduce before; with 3 levels, a plain column sum
 * of 2^18 rows of 16 was 2.3x less accurate than JAX's). */
#define CASCADE 32
#define LEVELS 4
static void cascade(float *sum, int64_t level, int64_t done, int64_t n) {
    for (int64_t k = 0, every = CASCADE; k + 1 < LEVELS && done % every == 0; k++, every *= CASCADE) {
        kernels.elementwise(OP_ADD, sum + (k + 1) * level, sum + (k + 1) * level, 1, sum + k * level, 1, n, NULL);
        memset(sum + k * level, 0, (size_t)n * sizeof(float));
    }
}

/* Run one instruction over `rows` rows (s: where each row's sum of an elementwise result also goes, or NULL; done:
 * the rows this worker ran before these, and level: the distance of a column sum's cascade levels). */
static void step(int op, const Ref *d, const Ref *a, const Ref *b, const Ref *c, const Ref *s, int64_t rows,
                 int64_t n, int64_t done, int64_t level) {
    if (op >= FIRST_COLUMN) { /* each row combined into the worker's partial result */
        for (int64_t r = 0; r < rows; r++) {
            kernels.elementwise(column_combine(op), d->p, d->p, 1, a->p + r * a->rs, a->cs, n, NULL);
            if (op == OP_CSUM) cascade(d->p, level, done + r + 1, n);
        }
    } else if (op >= FIRST_REDUCTION) {
        for (int64_t r = 0; r < rows; r++) d->p[r * d->rs] = kernels.reduce(op, a->p + r * a->rs, n);
    } else if (op == OP_SELECT) {
        for (int64_t r = 0; r < rows; r++) {
            if (d->cs == 0) /* every operand a scalar */
                d->p[r * d->rs] = a->p[r * a->rs] != 0.0f ? b->p[r * b->rs] : c->p[r * c->rs];
            else
                kernels.select(d->p + r * d->rs, a->p + r * a->rs, a->cs, b->p + r * b->rs, b->cs,
                               c->p + r * c->rs, c->cs, n);
        }
    } else if (a->cs == 0 && b->cs == 0 && d->cs == 0) { /* a scalar result: every operand is a scalar */
        for (int64_t r = 0; r < rows; r++)
            d->p[r * d->rs] = scalar_op(op, a->p[r * a->rs], op >= FIRST_BINARY ? b->p[r * b->rs] : 0.0f);
    } else {
        for (int64_t r = 0; r < rows; r++)
            kernels.elementwise(op, d->p ? d->p + r * d->rs : NULL, a->p + r * a->rs, a->cs,
                                op >= FIRST_BINARY ? b->p + r * b->rs : NULL, b->cs, n, s ? s->p + r * s->rs : NULL);
    }
}

/* Run the program over rows [begin, end) of a worker's frame, a block of rows at a time. */
static void *run_rows(void *arg) {
    Frame *f = (Frame *)arg;
    set_control(f->csr); /* (XLA's threads flush subnormals to zero: every worker computes as the caller does) */
    for (int64_t r0 = f->begin; r0 < f->end; r0 += f->rows) {
        int64_t rows = f->end - r0 < f->rows ? f->end - r0 : f->rows;
        for (int64_t i = 0; i < f->n_instr; i++) {
            const int32_t *ins = f->code + WIDTH * i;
            Ref d, a, b = {NULL, 0, 0}, c = {NULL, 0, 0}, s;
            resolve(f, ins[1], r0, &d);
            resolve(f, ins[2], r0, &a);
            if (ins[0] >= FIRST_BINARY && ins[0] < FIRST_REDUCTION) resolve(f, ins[3], r0, &b);
            if (ins[0] == OP_SELECT) resolve(f, ins[4], r0, &c);
            step(ins[0], &d, &a, &b, &c, KIND(ins[5]) == K_NONE ? NULL : (resolve(f, ins[5], r0, &s), &s), rows,
                 f->n, r0 - f->begin, f->n_outputs * f->n);
        }
    }
    return NULL;
}

/* The program over all rows, split into shares (one per PARALLEL elements, at most the CPUs, at most MAX_THREADS),
 * each with its own row values, run by the pool (run_shares). */
#define PARALLEL (1 << 18)
static Ffi_Error *run_threads(Ffi_CallFrame *frame, const Frame *f) {
    int64_t threads = (f->m * f->n) / PARALLEL + 1;
    if (threads > cpu_count()) threads = cpu_count();
    int64_t blocks = (f->m + f->rows - 1) / f->rows;
    if (threads > blocks) threads = blocks > 0 ? blocks : 1;
    size_t per = (size_t)(f->n_tmp * TMP_SIZE(f) + f->n_regs * f->rows + LEVELS * f->n_outputs * f->n + STAGGER);
    float *values = (float *)malloc((per + STAGGER) * threads * sizeof(float));
    Frame workers[MAX_THREADS];
    if (values == NULL) return fail(frame, FFI_ERR_RESOURCE_EXHAUSTED, "ember_rows: out of memory for the row values");
    unsigned int csr = get_control();
    for (int64_t t = 0; t < threads; t++) {
        workers[t] = *f;
        workers[t].csr = csr;
        workers[t].tmp = values + per * t + STAGGER / 2 * t; /* (threads' values apart by more than a page too) */
        workers[t].regs = workers[t].tmp + f->n_tmp * TMP_SIZE(f);
        workers[t].columns = workers[t].regs + f->n_regs * f->rows;
        for (int64_t o = 0; o < f->n_outputs; o++)
            if (f->column_op[o] >= 0)
                for (int64_t k = 0; k < LEVELS; k++)
                    for (int64_t j = 0; j < f->n; j++)
                        workers[t].columns[(k * f->n_outputs + o) * f->n + j] = column_identity(f->column_op[o]);
        workers[t].begin = blocks * t / threads * f->rows;
        workers[t].end = t + 1 == threads ? f->m : blocks * (t + 1) / threads * f->rows;
    }
    run_shares(run_rows, workers, sizeof(Frame), (int)threads);
    for (int64_t o = 0; o < f->n_outputs; o++) { /* the column outputs: the workers' partials, in worker order */
        if (f->column_op[o] < 0) continue;
        float *out = f->outputs[o];
        int64_t level = f->n_outputs * f->n;
        for (int64_t t = 0; t < threads && f->column_op[o] == OP_CSUM; t++) /* a worker's cascade, top down */
            for (int64_t k = LEVELS - 1; k > 0; k--) {
                float *into = workers[t].columns + o * f->n + (k - 1) * level;
                kernels.elementwise(OP_ADD, into, workers[t].columns + o * f->n + k * level, 1, into, 1, f->n,
                                    NULL);
            }
        memcpy(out, workers[0].columns + o * f->n, (size_t)f->n * sizeof(float));
        for (int64_t t = 1; t < threads; t++)
            kernels.elementwise(column_combine(f->column_op[o]), out, out, 1, workers[t].columns + o * f->n, 1,
                                f->n, NULL);
    }
    free(values);
    return NULL;
}

static Ffi_Error *rows_handler(Ffi_CallFrame *frame) {
    static _Thread_local char message[160];
    if (answer_metadata(frame)) return NULL;
    if (frame->stage != FFI_EXECUTE) return NULL;
    int64_t n_args = frame->args.size, n_rets = frame->rets.size;
    if (n_args < 1 || n_rets < 1)
        return fail(frame, FFI_ERR_INVALID_ARGUMENT, "ember_rows: needs a program, inputs and outputs");
    Ffi_Buffer *program = (Ffi_Buffer *)frame->args.args[0];
    if (program->dtype != FFI_S32 || program->rank != 1)
        return fail(frame, FFI_ERR_INVALID_ARGUMENT, "ember_rows: the program is not int32[k]");
    const int32_t *words = (const int32_t *)program->data;
    int64_t n_words = program->dims[0];
    if (n_words < 4) return fail(frame, FFI_ERR_INVALID_ARGUMENT, "ember_rows: the program has no header");
    int64_t n_instr = words[0], n_tmp = words[1], n_regs = words[2], n_lits = words[3];
    if (n_instr < 0 || n_tmp < 0 || n_regs < 0 || n_lits < 0 || 4 + n_lits + WIDTH * n_instr != n_words)
        return fail(frame, FFI_ERR_INVALID_ARGUMENT, "ember_rows: the program's length does not match its header");
    Frame f;
    memset(&f, 0, sizeof f);
    f.m = attr_int(frame, "rows", -1);
    f.n = attr_int(frame, "row", 0);
    if (f.n <= 0 || f.m < 0)
        return fail(frame, FFI_ERR_INVALID_ARGUMENT, "ember_rows: the attributes rows and row are missing");
    if (f.n > MAX_ROW_LENGTH || f.m > INT64_MAX / 4 / f.n) /* (the row values' sizes below cannot overflow) */
        return fail(frame, FFI_ERR_INVALID_ARGUMENT, "ember_rows: the attributes rows and row are out of range");
    f.lits = (const float *)(words + 4);
    const int32_t *code = words + 4 + n_lits;
    f.n_inputs = n_args - 1;
    f.n_outputs = n_rets;
    void *tables = malloc((size_t)(n_args + n_rets) * (sizeof(float *) + sizeof(int64_t) + 1));
    if (tables == NULL) return fail(frame, FFI_ERR_RESOURCE_EXHAUSTED, "ember_rows: out of memory");
    f.inputs = (float **)tables;
    f.outputs = f.inputs + f.n_inputs;
    f.in_size = (int64_t *)(f.outputs + f.n_outputs);
    f.out_size = f.in_size + f.n_inputs;
    int8_t *column_op = (int8_t *)(f.out_size + f.n_outputs);
    memset(column_op, -1, (size_t)f.n_outputs);
    f.column_op = column_op;
    Ffi_Error *err = NULL;
    for (int64_t i = 0; i < n_args + n_rets; i++) {
        Ffi_Buffer *buf = (Ffi_Buffer *)(i < n_args ? frame->args.args[i] : frame->rets.args[i - n_args]);
        int64_t size = 1;
        for (int64_t d = 0; d < buf->rank; d++) size *= buf->dims[d]; /* (XLA's buffers: no overflow) */
        if (i == 0) continue;
        if (buf->dtype != FFI_F32) {
            err = fail(frame, FFI_ERR_INVALID_ARGUMENT, "ember_rows: an operand or result is not float32");
            goto done;
        }
        if (i < n_args) {
            f.inputs[i - 1] = (float *)buf->data;
            f.in_size[i - 1] = size;
        } else {
            f.outputs[i - n_args] = (float *)buf->data;
            f.out_size[i - n_args] = size;
        }
    }
    f.rows = f.n >= BLOCK ? 1 : BLOCK / f.n;
    if (f.rows > f.m) f.rows = f.m > 0 ? f.m : 1;
    f.n_tmp = n_tmp;
    f.n_regs = n_regs;
    f.n_lits = n_lits;
    f.code = code;
    f.n_instr = n_instr;
    for (int64_t i = 0; i < n_instr; i++) { /* check every instruction once (each block then runs unchecked) */
        const int32_t *ins = code + WIDTH * i;
        int op = ins[0], none = KIND(ins[1]) == K_NONE, summed = KIND(ins[5]) != K_NONE;
        Ref d, a, b = {NULL, 0, 0}, c = {NULL, 0, 0}, s = {NULL, 0, 0};
        int ok = op >= 0 && op < OP_COUNT && (writable(ins[1]) || none) && resolve(&f, ins[1], 0, &d)
                 && resolve(&f, ins[2], 0, &a);
        if (ok && op >= FIRST_BINARY && op < FIRST_REDUCTION) ok = resolve(&f, ins[3], 0, &b);
        if (ok && op == OP_SELECT) ok = resolve(&f, ins[4], 0, &c) && !summed;
        if (ok && summed) ok = writable(ins[5]) && resolve(&f, ins[5], 0, &s) && s.cs == 0;
        if (ok && (KIND(ins[2]) == K_COL_OUT || KIND(ins[3]) == K_COL_OUT || KIND(ins[4]) == K_COL_OUT
                   || KIND(ins[5]) == K_COL_OUT))
            ok = 0; /* (a column result is complete only after the last row: nothing reads it) */
        if (ok && op >= FIRST_COLUMN) { /* rows into a column output, one op per output */
            ok = KIND(ins[1]) == K_COL_OUT && a.cs == 1 && !summed
                 && (column_op[INDEX(ins[1])] < 0 || column_op[INDEX(ins[1])] == op);
            if (ok) column_op[INDEX(ins[1])] = (int8_t)op;
        } else if (ok && KIND(ins[1]) == K_COL_OUT) ok = 0;
        else if (ok && op >= FIRST_REDUCTION) ok = d.cs == 0 && a.cs == 1 && !none && !summed; /* row -> scalar */
        else if (ok && (a.cs || b.cs || c.cs)) ok = d.cs == 1 && (!none || summed); /* a row (stored/summed) */
        else if (ok) ok = !summed && !none;               /* a scalar, or a scalar filling a row (d.cs 1) */
        if (!ok) {
            snprintf(message, sizeof message, "ember_rows: instruction %lld (op %d) is malformed", (long long)i, op);
            err = fail(frame, FFI_ERR_INVALID_ARGUMENT, message);
            goto done;
        }
    }
    for (int64_t i = 0; i < n_instr; i++) { /* a column output is written by its column op alone */
        int32_t dst = code[WIDTH * i + 1];
        if ((KIND(dst) == K_OUT || KIND(dst) == K_ROW_OUT) && INDEX(dst) < f.n_outputs && column_op[INDEX(dst)] >= 0) {
            err = fail(frame, FFI_ERR_INVALID_ARGUMENT, "ember_rows: a column output is also written by a row op");
            goto done;
        }
    }
    err = run_threads(frame, &f);
done:
    free(tables);
    return err;
}

/* ---- batched matrix products ------------------------------------------------------------------------------
 * `custom_call @ember_rows_bmm(a, b) -> c`, float32: for each of `batch` pairs, c[m, n] = a[m, k] . b[k, n], where
 * a is stored [batch, m, k] (trans_a 0) or [batch, k, m] (trans_a 1), b [batch, k, n] (trans_b 0) or [batch, n, k]
 * (trans_b 1), c [batch, m, n], all row-major. The plugin's XLA runs a batched dot one product after another on one
 * thread (so does jaxlib's, a little faster); here the batch is split among the pool's threads, and each product is
 * a 6 x 32 register-blocked AVX-512 kernel (6 x 16 on AVX2) over operands packed row-major (a: [m, k], b: [k, n]);
 * the sum over k is in order, one FMA per term. */
typedef struct {
    const float *a, *b;
    float *c;
    int64_t m, n, k, trans_a, trans_b, begin, end; /* the products [begin, end) of the batch */
    float *pack;                                   /* m * k + k * n floats of this worker's */
    unsigned int csr;
} Gemm;

#if defined(__x86_64__) && defined(__GNUC__)
/* c[rows, n] = a[rows, k] . b[k, n] for rows <= 6 (ROWS fixed), a and b row-major and packed. */
#define MICRO(ROWS)                                                                                             \
    for (int64_t j = 0; j < n; j += 32) {                                                                       \
        int64_t left = n - j;                                                                                   \
        __mmask16 k0 = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);                         \
        __mmask16 k1 = left >= 32 ? (__mmask16)0xffff : left > 16 ? (__mmask16)((1u << (left - 16)) - 1) : 0;  \
        __m512 acc[ROWS][2];                                                                                    \
        for (int r = 0; r < ROWS; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();                             \
        for (int64_t p = 0; p < k; p++) {                                                                       \
            __m512 b0 = _mm512_maskz_loadu_ps(k0, b + p * n + j), b1 = _mm512_maskz_loadu_ps(k1, b + p * n + j + 16); \
            for (int r = 0; r < ROWS; r++) {                                                                    \
                __m512 ar = _mm512_set1_ps(a[r * k + p]);                                                       \
                acc[r][0] = _mm512_fmadd_ps(ar, b0, acc[r][0]);                                                 \
                acc[r][1] = _mm512_fmadd_ps(ar, b1, acc[r][1]);                                                 \
            }                                                                                                   \
        }                                                                                                       \
        for (int r = 0; r < ROWS; r++) {                                                                        \
            _mm512_mask_storeu_ps(c + r * n + j, k0, acc[r][0]);                                                \
            _mm512_mask_storeu_ps(c + r * n + j + 16, k1, acc[r][1]);                                           \
        }                                                                                                       \
    }

AVX512 static void micro6(const float *a, const float *b, float *c, int64_t n, int64_t k) { MICRO(6) }
AVX512 static void micro1(const float *a, const float *b, float *c, int64_t n, int64_t k) { MICRO(1) }

AVX512 static void gemm_rows(const float *a, const float *b, float *c, int64_t m, int64_t n, int64_t k) {
    int64_t i = 0;
    for (; i + 6 <= m; i += 6) micro6(a + i * k, b, c + i * n, n, k);
    for (; i < m; i++) micro1(a + i * k, b, c + i * n, n, k);
}
#else
static void gemm_rows(const float *a, const float *b, float *c, int64_t m, int64_t n, int64_t k) {
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            float acc = 0.0f;
            for (int64_t p = 0; p < k; p++) acc = fmaf(a[i * k + p], b[p * n + j], acc);
            c[i * n + j] = acc;
        }
}
#endif

/* A worker's products: each operand packed row-major (a transposed copy where it is stored transposed). */
static void *run_gemm(void *arg) {
    Gemm *g = (Gemm *)arg;
    set_control(g->csr);
    int64_t m = g->m, n = g->n, k = g->k;
    for (int64_t t = g->begin; t < g->end; t++) {
        const float *a = g->a + t * m * k, *b = g->b + t * k * n;
        if (g->trans_a) { /* stored [k, m] */
            for (int64_t p = 0; p < k; p++)
                for (int64_t i = 0; i < m; i++) g->pack[i * k + p] = a[p * m + i];
            a = g->pack;
        }
        if (g->trans_b) { /* stored [n, k] */
            float *packed = g->pack + m * k;
            for (int64_t j = 0; j < n; j++)
                for (int64_t p = 0; p < k; p++) packed[p * n + j] = b[j * k + p];
            b = packed;
        }
        kernels.gemm(a, b, g->c + t * m * n, m, n, k);
    }
    return NULL;
}

static Ffi_Error *bmm_handler(Ffi_CallFrame *frame) {
    if (answer_metadata(frame)) return NULL;
    if (frame->stage != FFI_EXECUTE) return NULL;
    if (frame->args.size != 2 || frame->rets.size != 1)
        return fail(frame, FFI_ERR_INVALID_ARGUMENT, "ember_rows_bmm: needs two operands and one result");
    Ffi_Buffer *a = (Ffi_Buffer *)frame->args.args[0], *b = (Ffi_Buffer *)frame->args.args[1];
    Ffi_Buffer *c = (Ffi_Buffer *)frame->rets.args[0];
    int64_t batch = attr_int(frame, "batch", -1), m = attr_int(frame, "m", -1), n = attr_int(frame, "n", -1),
            k = attr_int(frame, "k", -1);
    int64_t sizes[3] = {1, 1, 1};
    Ffi_Buffer *bufs[3] = {a, b, c};
    for (int i = 0; i < 3; i++)
        for (int64_t d = 0; d < bufs[i]->rank; d++) sizes[i] *= bufs[i]->dims[d];
    int64_t trans_a = attr_int(frame, "trans_a", 0), trans_b = attr_int(frame, "trans_b", 0);
    int64_t mk = 0, kn = 0, mn = 0, bmk = 0, bkn = 0, bmn = 0; /* (the products, checked for overflow) */
    int overflow = batch < 1 || m < 1 || n < 1 || k < 1 || __builtin_mul_overflow(m, k, &mk)
                   || __builtin_mul_overflow(k, n, &kn) || __builtin_mul_overflow(m, n, &mn)
                   || __builtin_mul_overflow(batch, mk, &bmk) || __builtin_mul_overflow(batch, kn, &bkn)
                   || __builtin_mul_overflow(batch, mn, &bmn) || mk > INT64_MAX / 8 - kn;
    if (overflow || a->dtype != FFI_F32 || b->dtype != FFI_F32 || c->dtype != FFI_F32
        || (trans_a != 0 && trans_a != 1) || (trans_b != 0 && trans_b != 1)
        || sizes[0] != bmk || sizes[1] != bkn || sizes[2] != bmn)
        return fail(frame, FFI_ERR_INVALID_ARGUMENT,
                    "ember_rows_bmm: operands and attributes batch, m, n, k disagree (float32 [batch, m, k] . "
                    "[batch, k, n])");
    int64_t threads = batch < cpu_count() ? batch : cpu_count();
    size_t per = (size_t)(m * k + k * n + 16);
    float *pack = (float *)malloc(per * threads * sizeof(float));
    if (pack == NULL) return fail(frame, FFI_ERR_RESOURCE_EXHAUSTED, "ember_rows_bmm: out of memory");
    Gemm jobs[MAX_THREADS];
    unsigned int csr = get_control();
    for (int64_t t = 0; t < threads; t++) {
        jobs[t] = (Gemm){(const float *)a->data, (const float *)b->data, (float *)c->data, m, n, k,
                         trans_a, trans_b, batch * t / threads,
                         batch * (t + 1) / threads, pack + per * t, csr};
    }
    run_shares(run_gemm, jobs, sizeof(Gemm), (int)threads);
    free(pack);
    return NULL;
}

/* ---- transposes ------------------------------------------------------------------------------------------------
 * `custom_call @ember_rows_transpose(x) -> y`, x [batch, m, n] and y [batch, n, m] (row-major) of elements of
 * `size` bytes (1, 2, 4 or 8): y[b, j, i] = x[b, i, j]. The plugin's XLA copies a materialized f32[1024, 1024]
 * transpose element by element in 3.5 ms (jaxlib: 0.5 ms); here in tiles of TILE x TILE elements (the source
 * rows and destination rows of a tile stay in the cache), 16 x 16 blocks of 4-byte elements transposed in AVX-512
 * registers (8 x 8 in AVX2 registers where that form runs), the tiles split among the pool's threads. */
#define TILE 64
typedef struct {
    const char *x;
    char *y;
    int64_t m, n, size, begin, end; /* tiles [begin, end) of the batch's tile grid, in order */
    int64_t tiles_m, tiles_n;
} Transpose;

#if defined(__x86_64__) && defined(__GNUC__)
/* 16 rows of 16 floats at src (stride ss elements) transposed into dst (stride ds elements). */
AVX512 static void transpose16(const float *src, int64_t ss, float *dst, int64_t ds) {
    /* unpack 32-bit pairs, then 64-bit pairs (each 128-bit lane of b[4g + e] then holds element e of its four
     * columns of rows 4g .. 4g + 3), then gather the 128-bit lanes of the four groups (two shuffles) */
    __m512 r[16], a[16], b[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_ps(src + i * ss);
    for (int i = 0; i < 16; i += 2) {
        a[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        a[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        b[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a[i]), _mm512_castps_pd(a[i + 2])));
        b[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a[i]), _mm512_castps_pd(a[i + 2])));
        b[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a[i + 1]), _mm512_castps_pd(a[i + 3])));
        b[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a[i + 1]), _mm512_castps_pd(a[i + 3])));
    }
    for (int i = 0; i < 4; i++) { /* 128-bit lanes: rows i, i + 4 and i + 8, i + 12 */
        a[i] = _mm512_shuffle_f32x4(b[i], b[i + 4], 0x88);
        a[i + 4] = _mm512_shuffle_f32x4(b[i], b[i + 4], 0xdd);
        a[i + 8] = _mm512_shuffle_f32x4(b[i + 8], b[i + 12], 0x88);
        a[i + 12] = _mm512_shuffle_f32x4(b[i + 8], b[i + 12], 0xdd);
    }
    for (int i = 0; i < 4; i++) {
        b[i] = _mm512_shuffle_f32x4(a[i], a[i + 8], 0x88);
        b[i + 8] = _mm512_shuffle_f32x4(a[i], a[i + 8], 0xdd);
        b[i + 4] = _mm512_shuffle_f32x4(a[i + 4], a[i + 12], 0x88);
        b[i + 12] = _mm512_shuffle_f32x4(a[i + 4], a[i + 12], 0xdd);
    }
    for (int i = 0; i < 16; i++) _mm512_storeu_ps(dst + i * ds, b[i]);
}
#else
static void transpose16(const float *src, int64_t ss, float *dst, int64_t ds) {
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) dst[j * ds + i] = src[i * ss + j];
}
#endif

static void *run_transpose(void *arg) {
    const Transpose *t = (const Transpose *)arg;
    int64_t m = t->m, n = t->n, size = t->size, per_batch = t->tiles_m * t->tiles_n;
    for (int64_t k = t->begin; k < t->end; k++) {
        int64_t b = k / per_batch, ti = (k % per_batch) / t->tiles_n, tj = k % t->tiles_n;
        const char *x = t->x + b * m * n * size;
        char *y = t->y + b * m * n * size;
        int64_t i0 = ti * TILE, j0 = tj * TILE, i1 = i0 + TILE < m ? i0 + TILE : m, j1 = j0 + TILE < n ? j0 + TILE : n;
        int64_t i = i0, e = kernels.block;
        if (size == 4) /* (e x e blocks: 16 x 16 by AVX-512F, 8 x 8 by AVX2) */
            for (; i + e <= i1; i += e) {
                int64_t j = j0;
                for (; j + e <= j1; j += e)
                    kernels.transpose((const float *)x + i * n + j, n, (float *)y + j * m + i, m);
                for (; j < j1; j++)
                    for (int64_t r = i; r < i + e; r++) ((float *)y)[j * m + r] = ((const float *)x)[r * n + j];
            }
        for (; i < i1; i++)
            for (int64_t j = j0; j < j1; j++) memcpy(y + (j * m + i) * size, x + (i * n + j) * size, (size_t)size);
    }
    return NULL;
}

static Ffi_Error *transpose_handler(Ffi_CallFrame *frame) {
    if (answer_metadata(frame)) return NULL;
    if (frame->stage != FFI_EXECUTE) return NULL;
    if (frame->args.size != 1 || frame->rets.size != 1)
        return fail(frame, FFI_ERR_INVALID_ARGUMENT, "ember_rows_transpose: needs one operand and one result");
    Ffi_Buffer *x = (Ffi_Buffer *)frame->args.args[0], *y = (Ffi_Buffer *)frame->rets.args[0];
    int64_t batch = attr_int(frame, "batch", -1), m = attr_int(frame, "m", -1), n = attr_int(frame, "n", -1);
    int64_t size = ffi_element_size(x->dtype), sx = 1, sy = 1, bm = 0, total = 0;
    if (size > 8) size = 0; /* (1, 2, 4 or 8 bytes) */
    for (int64_t d = 0; d < x->rank; d++) sx *= x->dims[d];
    for (int64_t d = 0; d < y->rank; d++) sy *= y->dims[d];
    if (size == 0 || x->dtype != y->dtype || batch < 1 || m < 1 || n < 1 || __builtin_mul_overflow(batch, m, &bm)
        || __builtin_mul_overflow(bm, n, &total) || total != sx || total != sy || total > INT64_MAX / 8)
        return fail(frame, FFI_ERR_INVALID_ARGUMENT,
                    "ember_rows_transpose: the operand and result are not [batch, m, n] and [batch, n, m] of one "
                    "dtype of 1, 2, 4 or 8 bytes");
    int64_t tiles_m = (m + TILE - 1) / TILE, tiles_n = (n + TILE - 1) / TILE, tiles = batch * tiles_m * tiles_n;
    int64_t threads = total * size / (1 << 20) + 1; /* (a thread per MiB or so) */
    if (threads > cpu_count()) threads = cpu_count();
    if (threads > tiles) threads = tiles;
    Transpose jobs[MAX_THREADS];
    for (int64_t t = 0; t < threads; t++)
        jobs[t] = (Transpose){(const char *)x->data, (char *)y->data, m, n, size, tiles * t / threads,
                              tiles * (t + 1) / threads, tiles_m, tiles_n};
    run_shares(run_transpose, jobs, sizeof(Transpose), (int)threads);
    return NULL;
}

/* Which kernels this CPU runs (fills `kernels` once): "avx512f", "avx2" (with FMA), or NULL (none: handlers() is
 * empty and the lowering keeps XLA's ops). */
static const char *cpu_isa(void) {
    static const char *isa;
    static int chosen;
    if (chosen) return isa;
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) {
        kernels = (Kernels){row_elementwise, row_select, row_reduce, gemm_rows, transpose16, 16};
        isa = "avx512f";
    } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        kernels = (Kernels){row_elementwise_avx2, row_select_avx2, row_reduce_avx2, gemm_rows_avx2, transpose8, 8};
        isa = "avx2";
    }
#else
    kernels = (Kernels){row_elementwise, row_select, row_reduce, gemm_rows, transpose16, 16}; /* (never run) */
#endif
    chosen = 1;
    return isa;
}
static int cpu_supported(void) { return cpu_isa() != NULL; }

/* ---- module ---------------------------------------------------------------------------------------------- */
static PyObject *handlers(PyObject *self, PyObject *unused) {
    static const Ffi_HandlerEntry table[] = {
        {"ember_rows", (void *)rows_handler}, {"ember_rows_bmm", (void *)bmm_handler},
        {"ember_rows_transpose", (void *)transpose_handler},
    };
    return cpu_supported() ? handler_dict(table, sizeof table / sizeof table[0]) : PyDict_New();
}

static PyObject *opcodes(PyObject *self, PyObject *unused) {
    return Py_BuildValue("{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i}",
                         "neg",
                         OP_NEG, "exp", OP_EXP, "log", OP_LOG, "sqrt", OP_SQRT, "rsqrt", OP_RSQRT, "abs", OP_ABS,
                         "copy", OP_COPY, "sign", OP_SIGN, "is_finite", OP_ISFINITE, "add", OP_ADD, "sub", OP_SUB,
                         "mul", OP_MUL, "div", OP_DIV, "max", OP_MAX, "min", OP_MIN, "select", OP_SELECT, "sum",
                         OP_SUM, "reduce_max", OP_RMAX, "reduce_min", OP_RMIN, "column_sum", OP_CSUM,
                         "column_max", OP_CMAX, "column_min", OP_CMIN);
}

static PyObject *isa(PyObject *self, PyObject *noargs) {
    (void)self; (void)noargs;
    const char *name = cpu_isa();
    if (name == NULL) Py_RETURN_NONE;
    return PyUnicode_FromString(name);
}

static PyObject *threads(PyObject *self, PyObject *noargs) {
    (void)self; (void)noargs;
    return PyLong_FromLong(cpu_count());
}

static PyMethodDef methods[] = {
    {"threads", threads, METH_NOARGS,
     "How many threads a job is split among: the CPUs this process may use (its affinity), at most 16."},
    {"handlers", handlers, METH_NOARGS,
     "The FFI handlers: {custom-call target name: handler address}; empty where the CPU has neither AVX-512F nor "
     "AVX2 with FMA."},
    {"isa", isa, METH_NOARGS,
     "The kernels' instruction set on this CPU: 'avx512f', 'avx2' (AVX2 and FMA), or None (no handlers)."},
    {"opcodes", opcodes, METH_NOARGS, "The row program's opcodes: {name: code} (the kernel's own numbering)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "ember._runtime._rows",
    "ember's CPU kernels as XLA FFI handlers (see the comment at the top of _rows.c).", -1, methods,
};

PyMODINIT_FUNC PyInit__rows(void) { return PyModule_Create(&module_def); }
