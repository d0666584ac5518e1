/* ember._runtime._sort: sorting along the last axis as an XLA FFI handler (typed FFI, custom-call api_version 4).
 *
 * The CPU plugin's XLA sorts with a comparison function it calls per comparison (jaxlib's does too): ~200 ms for
 * 10**6 floats, where numpy's SIMD sort takes 2-4 ms. Here each key becomes an unsigned integer whose order is the
 * sort's order (to_key), and those integers are sorted: by a vectorized quicksort where the CPU has AVX-512F or AVX2
 * and the keys have 4 or 8 bytes (sort_quick.h around sort_avx512.h or sort_avx2.h, chosen when the sort runs), else by
 * a least-significant-digit radix sort (stable; 8- or 11-bit digits, a pass per digit that is not the same for every
 * element).
 *
 * The call: `custom_call @ember_sort(operands...) -> results...`, every operand of one shape [..., n] (row-major),
 * sorted along the last axis, each result an operand permuted, in order, but those the attribute `positions` (a bit
 * per result, after the keys) names: an integer result of 4 or 8 bytes holding the positions the sort took its
 * elements from (argsort's, without an iota gathered through them); the attribute `num_keys` says how many leading
 * operands are keys (lexicographic: key 0 decides, then key 1, ...). Keys are pred, s8-s64, u8-u64, f16, bf16, f32
 * or f64; the other operands any type of 1, 2, 4, 8 or 16 bytes. The order and the bits are those of ember's and
 * JAX's sorts on XLA's CPU: the sort is stable, floats in a total order where -0.0 == 0.0, NaNs (any sign or
 * payload) are equal and after +inf, and (as XLA's CPU compares bf16, f32 and f64 with subnormals flushed to zero) a
 * subnormal of those types equals zero; f16 is compared exactly (through f32); a bf16 NaN comes out as the quiet NaN
 * of its sign (XLA sorts bf16 as f32 and converts back). Equal keys keep their order, so a value that equals another
 * without being the same bits (-0.0 and 0.0, NaN payloads, subnormals) comes out where XLA's sort puts it.
 *
 * Two forms:
 *   - one operand (jnp.sort, median, quantile): the keys are sorted themselves (no order among equal keys is needed)
 *     and turned back into values; the elements that equal zero and the NaNs (the only equal keys of different
 *     bits) are then copied from the input, in its order, into the runs the sort gave them.
 *   - several operands (argsort, sort_key_val, lexsort, top_k): a permutation is sorted with the keys, from the last
 *     key to the first, each sort stable: a key of at most 4 bytes is packed above its position into one uint64
 *     (all distinct, so the quicksort orders equal keys by position), a longer one sorted with its index by radix;
 *     every operand is then gathered through the permutation.
 * Rows are split among the pool's threads (pool.h); a row of at least PARALLEL_ROW elements, when there are fewer
 * rows than threads, is sorted by all of them: the quicksort partitions it into a segment per thread, the radix
 * sort splits each pass's histogram and scatter into chunks (stable: chunk t's elements of a digit go after chunk
 * t-1's). Errors (operands that disagree, out of memory) come back as XLA_FFI_Error, never by aborting. Builds as
 * portable C (the quicksort only where the compiler targets x86-64). */
#define _GNU_SOURCE /* (sched_getaffinity, CPU_COUNT: pool.h) */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ffi_api.h"
#include "pool.h"

#define PARALLEL_ROW (1 << 16) /* the shortest row the threads share (shorter rows: a thread per row) */
#define RADIX 2048 /* the most values of a digit (11 bits: keys of 4 or 8 bytes; 8 bits for 1 or 2) */
#define MAX_DIGITS 8
#define DIGIT(v, shift, mask) ((unsigned)((v) >> (shift)) & (mask))

/* ---- keys ------------------------------------------------------------------------------------------------- */
enum { KEY_UNSIGNED, KEY_SIGNED, KEY_FLOAT };
typedef struct {
    int size, kind;
    uint64_t sign, exp, all; /* the sign bit, the exponent's bits (floats), all of the width's bits */
    int flush;               /* floats: subnormals equal zero (XLA's CPU compares bf16, f32, f64 so) */
} KeyType;

/* The classes of float keys that equal other bits: the zero class and NaN. */
static inline int is_nan_bits(uint64_t b, const KeyType *t) { return (b & (t->sign - 1)) > t->exp; }
static inline int is_zero_class(uint64_t b, const KeyType *t) {
    uint64_t mag = b & (t->sign - 1);
    return t->flush ? (mag & t->exp) == 0 : mag == 0;
}

/* The unsigned key of element bits b: its order is the sort's. (Branch-free: the signs of sorted data are random.) */
static inline uint64_t to_key(uint64_t b, const KeyType *t) {
    if (t->kind == KEY_UNSIGNED) return b;
    if (t->kind == KEY_SIGNED) return b ^ t->sign;
    uint64_t negative = (b >> (8 * t->size - 1)) & 1, k = b ^ (t->sign | ((0 - negative) & t->all));
    k = is_zero_class(b, t) ? t->sign : k;  /* -0.0, 0.0 (and flushed subnormals): +0.0's key */
    return is_nan_bits(b, t) ? t->all : k;  /* every NaN: last, and equal */
}

/* The bits of key k (for the zero class +0.0, for NaN a NaN: the one-operand form copies those from the input). */
static inline uint64_t from_key(uint64_t k, const KeyType *t) {
    if (t->kind == KEY_UNSIGNED) return k;
    if (t->kind == KEY_SIGNED) return k ^ t->sign;
    uint64_t negative = ((k >> (8 * t->size - 1)) & 1) ^ 1;
    return k ^ (t->sign | ((0 - negative) & t->all));
}

static inline uint64_t load_bits(const void *p, int64_t i, int size) {
    switch (size) {
        case 1: return ((const uint8_t *)p)[i];
        case 2: return ((const uint16_t *)p)[i];
        case 4: return ((const uint32_t *)p)[i];
        default: return ((const uint64_t *)p)[i];
    }
}

static inline void store_bits(void *p, int64_t i, int size, uint64_t v) {
    switch (size) {
        case 1: ((uint8_t *)p)[i] = (uint8_t)v; break;
        case 2: ((uint16_t *)p)[i] = (uint16_t)v; break;
        case 4: ((uint32_t *)p)[i] = (uint32_t)v; break;
        default: ((uint64_t *)p)[i] = v; break;
    }
}

/* ---- radix passes over items ------------------------------------------------------------------------------
 * An item is an unsigned integer of 1, 2, 4 or 8 bytes (a key, or a key packed above its index) or a Pair (an
 * 8-byte key and its index); each item type has a histogram and a scatter of a digit over items [begin, end). */
typedef struct {
    uint64_t key, index;
} Pair;
#define SELF(v) (v)
#define PAIR_KEY(v) ((v).key)
#define DEFINE_ITEMS(T, KEYOF)                                                                                \
    static void hist_##T(const void *src, int64_t begin, int64_t end, int shift, unsigned mask, int64_t *h) {  \
        const T *s = (const T *)src;                                                                           \
        for (int64_t i = begin; i < end; i++) h[DIGIT(KEYOF(s[i]), shift, mask)]++;                            \
    }                                                                                                          \
    static void scatter_##T(const void *src, void *dst, int64_t begin, int64_t end, int shift, unsigned mask,  \
                            int64_t *off) {                                                                    \
        const T *s = (const T *)src;                                                                           \
        T *d = (T *)dst;                                                                                       \
        for (int64_t i = begin; i < end; i++) {                                                                \
            T v = s[i];                                                                                        \
            d[off[DIGIT(KEYOF(v), shift, mask)]++] = v;                                                        \
        }                                                                                                      \
    }
DEFINE_ITEMS(uint8_t, SELF)
DEFINE_ITEMS(uint16_t, SELF)
DEFINE_ITEMS(uint32_t, SELF)
DEFINE_ITEMS(uint64_t, SELF)
DEFINE_ITEMS(Pair, PAIR_KEY)

typedef struct {
    void (*hist)(const void *, int64_t, int64_t, int, unsigned, int64_t *);
    void (*scatter)(const void *, void *, int64_t, int64_t, int, unsigned, int64_t *);
    size_t size;
} Items;
static const Items ITEMS_8 = {hist_uint8_t, scatter_uint8_t, 1}, ITEMS_16 = {hist_uint16_t, scatter_uint16_t, 2},
                   ITEMS_32 = {hist_uint32_t, scatter_uint32_t, 4}, ITEMS_64 = {hist_uint64_t, scatter_uint64_t, 8},
                   ITEMS_PAIR = {hist_Pair, scatter_Pair, sizeof(Pair)};

static const Items *unsigned_items(int size) {
    return size == 1 ? &ITEMS_8 : size == 2 ? &ITEMS_16 : size == 4 ? &ITEMS_32 : &ITEMS_64;
}

/* A chunk of a pass that the threads share: its histogram (phase 0), then its elements scattered (phase 1). */
typedef struct {
    const Items *items;
    const void *src;
    void *dst;
    int64_t begin, end;
    int shift, phase;
    unsigned mask;
    int64_t h[RADIX]; /* phase 0: the chunk's counts; phase 1: where its next element of each digit goes */
} Chunk;

static void *run_chunk(void *arg) {
    Chunk *c = (Chunk *)arg;
    if (c->phase == 0) {
        memset(c->h, 0, sizeof c->h);
        c->items->hist(c->src, c->begin, c->end, c->shift, c->mask, c->h);
    } else {
        c->items->scatter(c->src, c->dst, c->begin, c->end, c->shift, c->mask, c->h);
    }
    return NULL;
}

/* The digits of a key of `size` bytes in a row of n: how many bits each (11 for 4 or 8 bytes in a row of at least
 * 2^16, so 3 or 6 passes; else 8: a short row's passes cost less than clearing and adding up 2048 counts), and how
 * many. */
static int digit_bits(int size, int64_t n) { return size >= 4 && n >= (1 << 16) ? 11 : 8; }
static int digit_count(int size, int64_t n) { return (8 * size + digit_bits(size, n) - 1) / digit_bits(size, n); }

/* Sort n items at a (b: room for n more) stably by the digits of their key (a key of `size` bytes at bit `first`
 * of an item), whose counts over all items are hist[d * RADIX + v]; a digit every item shares is skipped. chunks:
 * how many threads share each pass (1: this thread alone; else `chunk` has room for them). Returns where the sorted
 * items are (a or b). */
static void *radix(const Items *it, void *a, void *b, int64_t n, const int64_t *hist, int size, int first,
                   int chunks, Chunk *chunk) {
    int bits = digit_bits(size, n), digits = digit_count(size, n);
    unsigned radix_size = 1u << bits, mask = radix_size - 1;
    for (int d = 0; d < digits; d++) {
        int shift = first + bits * d, skip = 0;
        const int64_t *h = hist + d * RADIX;
        for (unsigned v = 0; v < radix_size && !skip; v++) skip = h[v] == n;
        if (skip) continue;
        if (chunks <= 1) {
            int64_t off[RADIX], at = 0;
            for (unsigned v = 0; v < radix_size; v++) {
                off[v] = at;
                at += h[v];
            }
            it->scatter(a, b, 0, n, shift, mask, off);
        } else {
            for (int t = 0; t < chunks; t++) {
                chunk[t].items = it, chunk[t].src = a, chunk[t].dst = b, chunk[t].shift = shift, chunk[t].mask = mask;
                chunk[t].begin = n * t / chunks, chunk[t].end = n * (t + 1) / chunks, chunk[t].phase = 0;
            }
            run_shares(run_chunk, chunk, sizeof(Chunk), chunks);
            int64_t at = 0;
            for (unsigned v = 0; v < radix_size; v++)
                for (int t = 0; t < chunks; t++) {
                    int64_t count = chunk[t].h[v];
                    chunk[t].h[v] = at;
                    at += count;
                }
            for (int t = 0; t < chunks; t++) chunk[t].phase = 1;
            run_shares(run_chunk, chunk, sizeof(Chunk), chunks);
        }
        void *swap = a;
        a = b;
        b = swap;
    }
    return a;
}

/* ---- the vectorized quicksort (sort_quick.h around a kernel: AVX-512F, sort_avx512.h, or AVX2, sort_avx2.h; each
 * once for 4-byte and once for 8-byte keys) ------------------------------------------------------------------- */
#define SIMD_CAT2(a, b) a##b
#define SIMD_CAT(a, b) SIMD_CAT2(a, b)
#define SIMD_FN(name) SIMD_CAT(name, SIMD_SUF)
enum { ISA_PORTABLE, ISA_AVX2, ISA_AVX512 }; /* (the kernels; ISA_PORTABLE: the radix sort alone) */
static const char *const isa_names[] = {"portable", "avx2", "avx512f"};

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
/* The partition levels a quicksort of n keys goes down before heap sort takes over: 2 log2(n) + 4. */
static int quick_depth(int64_t n) {
    int d = 0;
    while (n > 1) {
        n >>= 1;
        d += 2;
    }
    return d + 4;
}

#define SIMD_TARGET __attribute__((target("avx512f,popcnt")))
/* partners[t][lane] = lane ^ (1 << t): the lane each lane is compared with in a step j = 1 << t apart */
static const uint32_t partners_u32_512[4][16] __attribute__((aligned(64))) = {
    {1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14}, {2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13},
    {4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11}, {8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7}};
static const uint64_t partners_u64_512[4][8] __attribute__((aligned(64))) = {
    {1, 0, 3, 2, 5, 4, 7, 6}, {2, 3, 0, 1, 6, 7, 4, 5}, {4, 5, 6, 7, 0, 1, 2, 3}, {0, 1, 2, 3, 4, 5, 6, 7}};

#define SIMD_T uint32_t
#define SIMD_LANES 16
#define SIMD_LOG_LANES 4
#define SIMD_SUF _u32_512
#define SIMD_MASK __mmask16
#define SIMD_MIN _mm512_min_epu32
#define SIMD_MAX _mm512_max_epu32
#define SIMD_LESS _mm512_cmplt_epu32_mask
#define SIMD_PERMUTE _mm512_permutexvar_epi32
#define SIMD_BLEND _mm512_mask_blend_epi32
#define SIMD_COMPRESS _mm512_mask_compressstoreu_epi32
#define SIMD_MASKLOAD _mm512_mask_loadu_epi32
#define SIMD_MASKSTORE _mm512_mask_storeu_epi32
#define SIMD_SET1(x) _mm512_set1_epi32((int)(x))
#define SIMD_SRAI _mm512_srai_epi32
#define SIMD_TESTN _mm512_testn_epi32_mask
#define SIMD_GREATER _mm512_cmpgt_epu32_mask
#define SIMD_MOV _mm512_mask_mov_epi32
#include "sort_avx512.h"
#include "sort_quick.h"
#include "sort_undef.h"

#define SIMD_T uint64_t
#define SIMD_LANES 8
#define SIMD_LOG_LANES 3
#define SIMD_SUF _u64_512
#define SIMD_MASK __mmask8
#define SIMD_MIN _mm512_min_epu64
#define SIMD_MAX _mm512_max_epu64
#define SIMD_LESS _mm512_cmplt_epu64_mask
#define SIMD_PERMUTE _mm512_permutexvar_epi64
#define SIMD_BLEND _mm512_mask_blend_epi64
#define SIMD_COMPRESS _mm512_mask_compressstoreu_epi64
#define SIMD_MASKLOAD _mm512_mask_loadu_epi64
#define SIMD_MASKSTORE _mm512_mask_storeu_epi64
#define SIMD_SET1(x) _mm512_set1_epi64((long long)(x))
#define SIMD_SRAI _mm512_srai_epi64
#define SIMD_TESTN _mm512_testn_epi64_mask
#define SIMD_GREATER _mm512_cmpgt_epu64_mask
#define SIMD_MOV _mm512_mask_mov_epi64
#include "sort_avx512.h"
#include "sort_quick.h"
#include "sort_undef.h"
#undef SIMD_TARGET

/* AVX2. compression_u32[m] (compression_u64[m]): the lanes of mask m first, then the others, as the 32-bit lane
 * indices of _mm256_permutevar8x32_epi32, a byte each (made by make_compressions when the module is imported). */
#define SIMD_TARGET __attribute__((target("avx2,popcnt")))
static uint64_t compression_u32[256], compression_u64[16];

static void make_compressions(void) {
    for (unsigned m = 0; m < 256; m++) {
        uint64_t entry = 0;
        int at = 0;
        for (int pass = 0; pass < 2; pass++)
            for (int lane = 0; lane < 8; lane++)
                if (((m >> lane) & 1) == (unsigned)(pass == 0)) entry |= (uint64_t)lane << (8 * at++);
        compression_u32[m] = entry;
    }
    for (unsigned m = 0; m < 16; m++) { /* (a 64-bit lane is two 32-bit lanes: each bit of m doubled) */
        unsigned doubled = 0;
        for (int lane = 0; lane < 4; lane++) doubled |= ((m >> lane) & 1u) * 3u << (2 * lane);
        compression_u64[m] = compression_u32[doubled];
    }
}

SIMD_TARGET static inline __m256i compression_of(const uint64_t *table, unsigned m) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(table + m)));
}

/* Transposes of SIMD_LANES registers (8 x 8 of 32 bits, 4 x 4 of 64 bits). */
SIMD_TARGET static inline __attribute__((always_inline)) void transpose_8x32(__m256i *c) {
    __m256i t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_epi32(c[i], c[i + 1]);
        t[i + 1] = _mm256_unpackhi_epi32(c[i], c[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);
        u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);
        u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);
        u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int i = 0; i < 4; i++) {
        c[i] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x20);
        c[i + 4] = _mm256_permute2x128_si256(u[i], u[i + 4], 0x31);
    }
}
SIMD_TARGET static inline __attribute__((always_inline)) void transpose_4x64(__m256i *c) {
    __m256i t0 = _mm256_unpacklo_epi64(c[0], c[1]), t1 = _mm256_unpackhi_epi64(c[0], c[1]);
    __m256i t2 = _mm256_unpacklo_epi64(c[2], c[3]), t3 = _mm256_unpackhi_epi64(c[2], c[3]);
    c[0] = _mm256_permute2x128_si256(t0, t2, 0x20);
    c[1] = _mm256_permute2x128_si256(t1, t3, 0x20);
    c[2] = _mm256_permute2x128_si256(t0, t2, 0x31);
    c[3] = _mm256_permute2x128_si256(t1, t3, 0x31);
}

#define SIMD_T uint32_t
#define SIMD_LANES 8
#define SIMD_LOG_LANES 3
#define SIMD_SUF _u32_avx2
#define SIMD_BASE_VECTORS 8
#define SIMD_PIVOT(p) _mm256_set1_epi32((int)((p) ^ 0x80000000u))
#define SIMD_BELOW(v, pv)                                                                                   \
    ((unsigned)_mm256_movemask_ps(                                                                          \
        _mm256_castsi256_ps(_mm256_cmpgt_epi32(pv, _mm256_xor_si256(v, _mm256_set1_epi32(INT32_MIN))))))
#define SIMD_COMPRESSION(m) compression_of(compression_u32, m)
#define SIMD_IN(v) (v)
#define SIMD_OUT(v) (v)
#define SIMD_MIN _mm256_min_epu32
#define SIMD_MAX _mm256_max_epu32
#define SIMD_PARTNER(v, j)                                                                                  \
    ((j) == 1 ? _mm256_shuffle_epi32(v, 0xb1) : (j) == 2 ? _mm256_shuffle_epi32(v, 0x4e)                   \
                                                         : _mm256_permute4x64_epi64(v, 0x4e))
#define SIMD_LANE_MASK(m)                                                                                   \
    _mm256_setr_epi32(-(int)((m) & 1), -(int)((m) >> 1 & 1), -(int)((m) >> 2 & 1), -(int)((m) >> 3 & 1),   \
                      -(int)((m) >> 4 & 1), -(int)((m) >> 5 & 1), -(int)((m) >> 6 & 1), -(int)((m) >> 7 & 1))
#define SIMD_SET1(x) _mm256_set1_epi32((int)(x))
#define SIMD_NEGATIVE(b) _mm256_srai_epi32(b, 31)
#define SIMD_EQ _mm256_cmpeq_epi32
#define SIMD_GT _mm256_cmpgt_epi32
#define SIMD_SORT_COLUMNS(c) /* (the 19 exchanges of an optimal network of 8) */                           \
    do {                                                                                                    \
        SIMD_EXCHANGE(c[0], c[2]); SIMD_EXCHANGE(c[1], c[3]); SIMD_EXCHANGE(c[4], c[6]); SIMD_EXCHANGE(c[5], c[7]); \
        SIMD_EXCHANGE(c[0], c[4]); SIMD_EXCHANGE(c[1], c[5]); SIMD_EXCHANGE(c[2], c[6]); SIMD_EXCHANGE(c[3], c[7]); \
        SIMD_EXCHANGE(c[0], c[1]); SIMD_EXCHANGE(c[2], c[3]); SIMD_EXCHANGE(c[4], c[5]); SIMD_EXCHANGE(c[6], c[7]); \
        SIMD_EXCHANGE(c[2], c[4]); SIMD_EXCHANGE(c[3], c[5]); SIMD_EXCHANGE(c[1], c[4]); SIMD_EXCHANGE(c[3], c[6]); \
        SIMD_EXCHANGE(c[1], c[2]); SIMD_EXCHANGE(c[3], c[4]); SIMD_EXCHANGE(c[5], c[6]);                        \
    } while (0)
#define SIMD_TRANSPOSE transpose_8x32
#define SIMD_REVERSE(v) _mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0))
#define SIMD_PS(v) _mm256_castsi256_ps(v)
#define SIMD_SPLIT_LO(a, b, j)                                                                              \
    ((j) == 4   ? _mm256_permute2x128_si256(a, b, 0x20)                                                     \
     : (j) == 2 ? _mm256_unpacklo_epi64(a, b)                                                               \
                : _mm256_castps_si256(_mm256_shuffle_ps(SIMD_PS(a), SIMD_PS(b), 0x88)))
#define SIMD_SPLIT_HI(a, b, j)                                                                              \
    ((j) == 4   ? _mm256_permute2x128_si256(a, b, 0x31)                                                     \
     : (j) == 2 ? _mm256_unpackhi_epi64(a, b)                                                               \
                : _mm256_castps_si256(_mm256_shuffle_ps(SIMD_PS(a), SIMD_PS(b), 0xdd)))
#define SIMD_JOIN_LO(lo, hi, j)                                                                             \
    ((j) == 4 ? _mm256_permute2x128_si256(lo, hi, 0x20) : (j) == 2 ? _mm256_unpacklo_epi64(lo, hi)         \
                                                         : _mm256_unpacklo_epi32(lo, hi))
#define SIMD_JOIN_HI(lo, hi, j)                                                                             \
    ((j) == 4 ? _mm256_permute2x128_si256(lo, hi, 0x31) : (j) == 2 ? _mm256_unpackhi_epi64(lo, hi)         \
                                                         : _mm256_unpackhi_epi32(lo, hi))
#include "sort_avx2.h"
#include "sort_quick.h"
#include "sort_undef.h"

/* (u64 in the bitonic network: the sign bit flipped, so that the signed compare orders them) */
SIMD_TARGET static inline __m256i min_u64_flipped(__m256i a, __m256i b) {
    return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(a, b));
}
SIMD_TARGET static inline __m256i max_u64_flipped(__m256i a, __m256i b) {
    return _mm256_blendv_epi8(b, a, _mm256_cmpgt_epi64(a, b));
}
#define SIMD_T uint64_t
#define SIMD_LANES 4
#define SIMD_LOG_LANES 2
#define SIMD_SUF _u64_avx2
#define SIMD_BASE_VECTORS 16
#define SIMD_PIVOT(p) _mm256_set1_epi64x((long long)((p) ^ (1ull << 63)))
#define SIMD_BELOW(v, pv)                                                                                   \
    ((unsigned)_mm256_movemask_pd(                                                                          \
        _mm256_castsi256_pd(_mm256_cmpgt_epi64(pv, _mm256_xor_si256(v, _mm256_set1_epi64x(INT64_MIN))))))
#define SIMD_COMPRESSION(m) compression_of(compression_u64, m)
#define SIMD_IN(v) _mm256_xor_si256(v, _mm256_set1_epi64x(INT64_MIN))
#define SIMD_OUT(v) _mm256_xor_si256(v, _mm256_set1_epi64x(INT64_MIN))
#define SIMD_MIN min_u64_flipped
#define SIMD_MAX max_u64_flipped
#define SIMD_PARTNER(v, j) ((j) == 1 ? _mm256_shuffle_epi32(v, 0x4e) : _mm256_permute4x64_epi64(v, 0x4e))
#define SIMD_LANE_MASK(m)                                                                                   \
    _mm256_setr_epi64x(-(long long)((m) & 1), -(long long)((m) >> 1 & 1), -(long long)((m) >> 2 & 1),       \
                       -(long long)((m) >> 3 & 1))
#define SIMD_SET1(x) _mm256_set1_epi64x((long long)(x))
#define SIMD_NEGATIVE(b) _mm256_cmpgt_epi64(_mm256_setzero_si256(), b)
#define SIMD_EQ _mm256_cmpeq_epi64
#define SIMD_GT _mm256_cmpgt_epi64
#define SIMD_SORT_COLUMNS(c)                                                                                \
    do {                                                                                                    \
        SIMD_EXCHANGE(c[0], c[1]); SIMD_EXCHANGE(c[2], c[3]); SIMD_EXCHANGE(c[0], c[2]);                    \
        SIMD_EXCHANGE(c[1], c[3]); SIMD_EXCHANGE(c[1], c[2]);                                               \
    } while (0)
#define SIMD_TRANSPOSE transpose_4x64
#define SIMD_REVERSE(v) _mm256_permute4x64_epi64(v, 0x1b)
#define SIMD_SPLIT_LO(a, b, j) ((j) == 2 ? _mm256_permute2x128_si256(a, b, 0x20) : _mm256_unpacklo_epi64(a, b))
#define SIMD_SPLIT_HI(a, b, j) ((j) == 2 ? _mm256_permute2x128_si256(a, b, 0x31) : _mm256_unpackhi_epi64(a, b))
#define SIMD_JOIN_LO(lo, hi, j) SIMD_SPLIT_LO(lo, hi, j)
#define SIMD_JOIN_HI(lo, hi, j) SIMD_SPLIT_HI(lo, hi, j)
#include "sort_avx2.h"
#include "sort_quick.h"
#include "sort_undef.h"
#undef SIMD_TARGET

static int isa_forced = -1; /* (set_isa: the tests of each kernel, and of the radix sort, on one machine) */

/* The best kernel this CPU runs. */
static int detected_isa(void) {
    static int detected = -1;
    if (detected < 0) {
        __builtin_cpu_init();
        detected = __builtin_cpu_supports("avx512f") ? ISA_AVX512
                   : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt") ? ISA_AVX2
                                                                                         : ISA_PORTABLE;
    }
    return detected;
}

/* The kernel the sorts use: the CPU's best, or the one set_isa chose. */
static int simd_isa(void) { return isa_forced >= 0 ? isa_forced : detected_isa(); }

#define DISPATCH(call512, call2) (simd_isa() == ISA_AVX512 ? (call512) : (call2))
static void sort_u32(uint32_t *a, int64_t n, int threads) {
    DISPATCH(sort_u32_512(a, n, threads), sort_u32_avx2(a, n, threads));
}
static void sort_u64(uint64_t *a, int64_t n, int threads) {
    DISPATCH(sort_u64_512(a, n, threads), sort_u64_avx2(a, n, threads));
}
static void to_keys_u32(const uint32_t *s, uint32_t *d, int64_t n, const KeyType *t) {
    DISPATCH(to_keys_u32_512(s, d, n, t), to_keys_u32_avx2(s, d, n, t));
}
static void to_keys_u64(const uint64_t *s, uint64_t *d, int64_t n, const KeyType *t) {
    DISPATCH(to_keys_u64_512(s, d, n, t), to_keys_u64_avx2(s, d, n, t));
}
static void from_keys_u32(uint32_t *a, int64_t n, const KeyType *t) {
    DISPATCH(from_keys_u32_512(a, n, t), from_keys_u32_avx2(a, n, t));
}
static void from_keys_u64(uint64_t *a, int64_t n, const KeyType *t) {
    DISPATCH(from_keys_u64_512(a, n, t), from_keys_u64_avx2(a, n, t));
}
static void select_sorted_u64(uint64_t *a, int64_t n, int64_t k) {
    DISPATCH(select_sorted_u64_512(a, n, k, quick_depth(n)), select_sorted_u64_avx2(a, n, k, quick_depth(n)));
}
#undef DISPATCH
#else
/* (another architecture or compiler: the radix sort alone; simd_isa() is ISA_PORTABLE, so these never run) */
static void make_compressions(void) {}
static int isa_forced = -1;
static int simd_isa(void) { return ISA_PORTABLE; }
static int detected_isa(void) { return ISA_PORTABLE; }
static void sort_u32(uint32_t *a, int64_t n, int threads) { (void)a; (void)n; (void)threads; }
static void sort_u64(uint64_t *a, int64_t n, int threads) { (void)a; (void)n; (void)threads; }
static void to_keys_u32(const uint32_t *s, uint32_t *d, int64_t n, const KeyType *t) { (void)s, (void)d, (void)n, (void)t; }
static void to_keys_u64(const uint64_t *s, uint64_t *d, int64_t n, const KeyType *t) { (void)s, (void)d, (void)n, (void)t; }
static void from_keys_u32(uint32_t *a, int64_t n, const KeyType *t) { (void)a, (void)n, (void)t; }
static void from_keys_u64(uint64_t *a, int64_t n, const KeyType *t) { (void)a, (void)n, (void)t; }
static void select_sorted_u64(uint64_t *a, int64_t n, int64_t k) { (void)a, (void)n, (void)k; }
#endif
static int simd_supported(void) { return simd_isa() != ISA_PORTABLE; }

/* ---- a row -------------------------------------------------------------------------------------------------- */
typedef struct Job {
    int n_ops, num_keys;
    int64_t n;                     /* the row length */
    const void **in;               /* per result: its operand (NULL: the positions sorted), the results, their
                                      element sizes */
    void **out;
    const int *size;
    const int *dtype;              /* their FFI dtypes */
    const KeyType *keys;           /* the keys' types (num_keys) */
    int64_t begin, end;            /* the rows this worker sorts */
    void *scratch;                 /* a worker's room: row_scratch(n) bytes */
    int chunks;                    /* threads sharing each row's passes (1: none) */
    Chunk *chunk;
    void (*values)(const struct Job *, int64_t); /* the one-operand sort of the key's type */
} Job;

/* The room a row needs: two arrays of n items (at most Pairs), a permutation of n indices, the histograms. */
static size_t row_scratch(int64_t n) {
    return (size_t)n * (2 * sizeof(Pair) + sizeof(uint64_t)) + MAX_DIGITS * RADIX * sizeof(int64_t) + 64;
}

/* Keys of 4 or 8 bytes made from the elements at src into dst (to: 1), or elements made back from the keys at src
 * (0; dst may be src), by the vectorized transforms, split among `threads` threads for a long row. */
typedef struct {
    const uint8_t *src;
    uint8_t *dst;
    int64_t n;
    const KeyType *t;
    int to;
} Convert;

static void *run_convert(void *arg) {
    const Convert *c = (const Convert *)arg;
    if (c->t->size == 4) {
        if (c->to) to_keys_u32((const uint32_t *)c->src, (uint32_t *)c->dst, c->n, c->t);
        else from_keys_u32((uint32_t *)c->dst, c->n, c->t);
    } else {
        if (c->to) to_keys_u64((const uint64_t *)c->src, (uint64_t *)c->dst, c->n, c->t);
        else from_keys_u64((uint64_t *)c->dst, c->n, c->t);
    }
    return NULL;
}

static void convert_keys(const void *src, void *dst, int64_t n, const KeyType *t, int to, int threads) {
    Convert shares[MAX_THREADS];
    if (threads < 1) threads = 1;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    for (int k = 0; k < threads; k++) {
        int64_t begin = n * k / threads, end = n * (k + 1) / threads;
        shares[k] = (Convert){(const uint8_t *)src + begin * t->size, (uint8_t *)dst + begin * t->size, end - begin,
                              t, to};
    }
    if (threads > 1) run_shares(run_convert, shares, sizeof(Convert), threads);
    else run_convert(&shares[0]);
}

/* The first of the n sorted keys at p (of w bytes) that is not below key. */
static inline int64_t lower_bound(const void *p, int64_t n, int w, uint64_t key) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (load_bits(p, mid, w) < key) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* One operand: its keys sorted, turned back into values, the equal classes of different bits copied in. (Inlined
 * into one function per key type below, where t's fields are constants.) */
static inline __attribute__((always_inline)) void values_row(const Job *job, int64_t row, const KeyType *t) {
    int w = t->size;
    int64_t n = job->n;
    const uint8_t *src = (const uint8_t *)job->in[0] + row * n * w;
    uint8_t *dst = (uint8_t *)job->out[0] + row * n * w;
    void *sorted = dst;
    int quick = (w == 4 || w == 8) && simd_supported(); /* the vectorized quicksort; else the radix sort */
    if (quick) {
        convert_keys(src, dst, n, t, 1, job->chunks);
        if (w == 4) sort_u32((uint32_t *)dst, n, job->chunks);
        else sort_u64((uint64_t *)dst, n, job->chunks);
    } else {
        for (int64_t i = 0; i < n; i++) store_bits(dst, i, w, to_key(load_bits(src, i, w), t));
        int bits = digit_bits(w, n), digits = digit_count(w, n);
        unsigned mask = (1u << bits) - 1;
        int64_t *hist = (int64_t *)((char *)job->scratch + (size_t)n * 2 * sizeof(Pair));
        memset(hist, 0, sizeof(int64_t) * RADIX * (size_t)digits);
        for (int64_t i = 0; i < n; i++) {
            uint64_t k = load_bits(dst, i, w);
            for (int d = 0; d < digits; d++) hist[d * RADIX + DIGIT(k, bits * d, mask)]++;
        }
        sorted = radix(unsigned_items(w), dst, job->scratch, n, hist, w, 0, job->chunks, job->chunk);
    }
    int64_t negative = 0, zeros = 0, nans = 0; /* (floats: where the sort put the classes of several bits) */
    if (t->kind == KEY_FLOAT) {
        negative = lower_bound(sorted, n, w, t->sign);
        zeros = lower_bound(sorted, n, w, t->sign + 1) - negative;
        nans = n - lower_bound(sorted, n, w, t->all);
    }
    if (quick) convert_keys(dst, dst, n, t, 0, job->chunks);
    else
        for (int64_t i = 0; i < n; i++) store_bits(dst, i, w, from_key(load_bits(sorted, i, w), t));
    if (zeros + nans > 0) { /* their bits as the input has them, in its order */
        int64_t z = negative, q = n - nans;
        for (int64_t i = 0; i < n; i++) {
            uint64_t b = load_bits(src, i, w);
            if (is_nan_bits(b, t)) store_bits(dst, q++, w, b);
            else if (is_zero_class(b, t)) store_bits(dst, z++, w, b);
        }
    }
}

#define KEY_TYPE(SIZE, KIND, EXP, FLUSH) \
    {SIZE, KIND, 1ull << (8 * SIZE - 1), EXP, (1ull << (8 * SIZE - 1)) | ((1ull << (8 * SIZE - 1)) - 1), FLUSH}
#define DEFINE_VALUES(NAME, SIZE, KIND, EXP, FLUSH)                       \
    static const KeyType key_##NAME = KEY_TYPE(SIZE, KIND, EXP, FLUSH);   \
    static void values_##NAME(const Job *job, int64_t row) { values_row(job, row, &key_##NAME); }
DEFINE_VALUES(u8, 1, KEY_UNSIGNED, 0, 0)
DEFINE_VALUES(u16, 2, KEY_UNSIGNED, 0, 0)
DEFINE_VALUES(u32, 4, KEY_UNSIGNED, 0, 0)
DEFINE_VALUES(u64, 8, KEY_UNSIGNED, 0, 0)
DEFINE_VALUES(s8, 1, KEY_SIGNED, 0, 0)
DEFINE_VALUES(s16, 2, KEY_SIGNED, 0, 0)
DEFINE_VALUES(s32, 4, KEY_SIGNED, 0, 0)
DEFINE_VALUES(s64, 8, KEY_SIGNED, 0, 0)
DEFINE_VALUES(f16, 2, KEY_FLOAT, 0x7c00u, 0)
DEFINE_VALUES(bf16, 2, KEY_FLOAT, 0x7f80u, 1)
DEFINE_VALUES(f32, 4, KEY_FLOAT, 0x7f800000u, 1)
DEFINE_VALUES(f64, 8, KEY_FLOAT, 0x7ff0000000000000ull, 1)

/* The key type of an FFI dtype and its one-operand sort; 0 when it cannot be a key. */
static int key_type(int dtype, KeyType *t, void (**values)(const Job *, int64_t)) {
    const KeyType *k;
    switch (dtype) {
        case FFI_PRED: case FFI_U8: k = &key_u8; *values = values_u8; break;
        case FFI_U16: k = &key_u16; *values = values_u16; break;
        case FFI_U32: k = &key_u32; *values = values_u32; break;
        case FFI_U64: k = &key_u64; *values = values_u64; break;
        case FFI_S8: k = &key_s8; *values = values_s8; break;
        case FFI_S16: k = &key_s16; *values = values_s16; break;
        case FFI_S32: k = &key_s32; *values = values_s32; break;
        case FFI_S64: k = &key_s64; *values = values_s64; break;
        case FFI_F16: k = &key_f16; *values = values_f16; break;
        case FFI_BF16: k = &key_bf16; *values = values_bf16; break;
        case FFI_F32: k = &key_f32; *values = values_f32; break;
        case FFI_F64: k = &key_f64; *values = values_f64; break;
        default: return 0;
    }
    *t = *k;
    return 1;
}

/* Several operands: the permutation the keys make (the last key first, each a stable sort), then each operand
 * gathered through it; but for the first key, whose values come from its sorted keys where the quicksort sorted
 * them (the classes of several bits from the input). */
static void sort_permuted(const Job *job, int64_t row) {
    int64_t n = job->n;
    Pair *items = (Pair *)job->scratch, *other = items + n;
    uint64_t *perm = (uint64_t *)(other + n), *u = (uint64_t *)items;
    int64_t *hist = (int64_t *)(perm + n);
    int have_perm = 0, first_sorted = 0; /* first_sorted: u holds key 0's keys above their positions, sorted */
    for (int k = job->num_keys - 1; k >= 0; k--) {
        const KeyType *t = &job->keys[k];
        int w = t->size, packed = w <= 4 && n <= (int64_t)UINT32_MAX;
        int bits = digit_bits(w, n), digits = digit_count(w, n);
        unsigned mask = (1u << bits) - 1;
        const uint8_t *src = (const uint8_t *)job->in[k] + row * n * w;
        if (packed && simd_supported()) { /* key << 32 | position: distinct, so the quicksort orders them stably */
            if (!have_perm && w == 4) {
                uint32_t *keys = (uint32_t *)perm; /* (free until the permutation is made) */
                to_keys_u32((const uint32_t *)src, keys, n, t);
                for (int64_t i = 0; i < n; i++) u[i] = (uint64_t)keys[i] << 32 | (uint64_t)i;
            } else {
                for (int64_t i = 0; i < n; i++)
                    u[i] = to_key(load_bits(src, have_perm ? perm[i] : (uint64_t)i, w), t) << 32 | (uint64_t)i;
            }
            sort_u64(u, n, job->chunks);
            if (have_perm) {
                uint64_t *moved = (uint64_t *)other;
                for (int64_t i = 0; i < n; i++) moved[i] = perm[u[i] & 0xffffffffu];
                memcpy(perm, moved, (size_t)n * sizeof(uint64_t));
            } else {
                for (int64_t i = 0; i < n; i++) perm[i] = u[i] & 0xffffffffu;
            }
            first_sorted = k == 0;
        } else if (packed) { /* key << 32 | index: one uint64 per element, sorted by the key's digits */
            memset(hist, 0, sizeof(int64_t) * RADIX * (size_t)digits);
            for (int64_t i = 0; i < n; i++) {
                uint64_t index = have_perm ? perm[i] : (uint64_t)i, key = to_key(load_bits(src, index, w), t);
                u[i] = key << 32 | index;
                for (int d = 0; d < digits; d++) hist[d * RADIX + DIGIT(key, bits * d, mask)]++;
            }
            uint64_t *s = (uint64_t *)radix(&ITEMS_64, u, other, n, hist, w, 32, job->chunks, job->chunk);
            for (int64_t i = 0; i < n; i++) perm[i] = s[i] & 0xffffffffu;
        } else {
            memset(hist, 0, sizeof(int64_t) * RADIX * (size_t)digits);
            for (int64_t i = 0; i < n; i++) {
                uint64_t index = have_perm ? perm[i] : (uint64_t)i, key = to_key(load_bits(src, index, w), t);
                items[i] = (Pair){key, index};
                for (int d = 0; d < digits; d++) hist[d * RADIX + DIGIT(key, bits * d, mask)]++;
            }
            Pair *s = (Pair *)radix(&ITEMS_PAIR, items, other, n, hist, w, 0, job->chunks, job->chunk);
            for (int64_t i = 0; i < n; i++) perm[i] = s[i].index;
        }
        have_perm = 1;
    }
    for (int o = 0; o < job->n_ops; o++) {
        size_t w = (size_t)job->size[o];
        const uint8_t *src = (const uint8_t *)job->in[o] + (size_t)(row * n) * w;
        uint8_t *dst = (uint8_t *)job->out[o] + (size_t)(row * n) * w;
        if (job->in[o] == NULL) { /* the positions (argsort) */
            if (w == 4) for (int64_t i = 0; i < n; i++) ((uint32_t *)dst)[i] = (uint32_t)perm[i];
            else memcpy(dst, perm, (size_t)n * sizeof(uint64_t));
            continue;
        }
        if (o == 0 && first_sorted) {
            const KeyType *t = &job->keys[0];
            for (int64_t i = 0; i < n; i++) {
                uint64_t k = u[i] >> 32;
                int several = t->kind == KEY_FLOAT && (k == t->sign || k == t->all); /* (zero class, NaN) */
                store_bits(dst, i, (int)w, several ? load_bits(src, (int64_t)perm[i], (int)w) : from_key(k, t));
            }
            continue;
        }
        switch (w) {
            case 1: for (int64_t i = 0; i < n; i++) dst[i] = src[perm[i]]; break;
            case 2: for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = ((const uint16_t *)src)[perm[i]]; break;
            case 4: for (int64_t i = 0; i < n; i++) ((uint32_t *)dst)[i] = ((const uint32_t *)src)[perm[i]]; break;
            case 8: for (int64_t i = 0; i < n; i++) ((uint64_t *)dst)[i] = ((const uint64_t *)src)[perm[i]]; break;
            default: for (int64_t i = 0; i < n; i++) memcpy(dst + i * w, src + perm[i] * w, w); break;
        }
    }
}

/* XLA's CPU sorts bf16 operands as f32 and converts them back, which makes each NaN the quiet NaN of its sign (0x7fc0,
 * 0xffc0): so does the kernel, so that its results are XLA's bit for bit. */
static void quiet_bf16_nans(uint16_t *p, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if ((p[i] & 0x7fffu) > 0x7f80u) p[i] = (uint16_t)((p[i] & 0x8000u) | 0x7fc0u);
}

static void *run_rows(void *arg) {
    const Job *job = (const Job *)arg;
    for (int64_t r = job->begin; r < job->end; r++) {
        if (job->n_ops == 1) job->values(job, r);
        else sort_permuted(job, r);
        for (int o = 0; o < job->n_ops; o++)
            if (job->dtype[o] == FFI_BF16) quiet_bf16_nans((uint16_t *)job->out[o] + r * job->n, job->n);
    }
    return NULL;
}

/* ---- the handler ------------------------------------------------------------------------------------------- */
static int64_t element_count(const Ffi_Buffer *b) {
    int64_t count = 1;
    for (int64_t d = 0; d < b->rank; d++) count *= b->dims[d]; /* (XLA's buffers: no overflow) */
    return count;
}

#define MAX_OPERANDS 63 /* (results: the attribute positions has a bit for each) */
static Ffi_Error *sort_handler(Ffi_CallFrame *frame) {
    if (answer_metadata(frame)) return NULL;
    if (frame->stage != FFI_EXECUTE) return NULL;
    int64_t n_ops = frame->rets.size, num_keys = attr_int(frame, "num_keys", -1);
    int64_t positions = attr_int(frame, "positions", 0);
    if (n_ops < 1 || n_ops > MAX_OPERANDS || positions < 0 || positions >= (int64_t)1 << n_ops
        || frame->args.size != n_ops - __builtin_popcountll((unsigned long long)positions))
        return fail(frame, FFI_ERR_INVALID_ARGUMENT,
                    "ember_sort: needs 1 to 63 results, an operand for each but those the attribute positions names");
    if (num_keys < 1 || num_keys > frame->args.size || (positions & (((int64_t)1 << num_keys) - 1)) != 0)
        return fail(frame, FFI_ERR_INVALID_ARGUMENT, "ember_sort: the attribute num_keys is missing or out of range");
    const void *in[MAX_OPERANDS];
    void *out[MAX_OPERANDS];
    int size[MAX_OPERANDS], dtype[MAX_OPERANDS];
    KeyType keys[MAX_OPERANDS];
    void (*values)(const Job *, int64_t) = NULL;
    const Ffi_Buffer *first = (const Ffi_Buffer *)frame->rets.args[0];
    if (first->rank < 1)
        return fail(frame, FFI_ERR_INVALID_ARGUMENT, "ember_sort: the operands must have at least one dimension");
    int64_t n = first->dims[first->rank - 1], total = element_count(first);
    for (int64_t o = 0, k = 0; o < n_ops; o++) {
        const Ffi_Buffer *r = (const Ffi_Buffer *)frame->rets.args[o];
        int written = (int)(positions >> o & 1); /* (the positions sorted, not an operand permuted) */
        const Ffi_Buffer *a = written ? r : (const Ffi_Buffer *)frame->args.args[k++];
        int same = a->rank == first->rank && r->rank == first->rank && a->dtype == r->dtype;
        for (int64_t d = 0; same && d < a->rank; d++) same = a->dims[d] == first->dims[d] && r->dims[d] == a->dims[d];
        size[o] = ffi_element_size(r->dtype);
        dtype[o] = r->dtype;
        if (written) same = same && (r->dtype == FFI_S32 || r->dtype == FFI_S64 || r->dtype == FFI_U32
                                     || r->dtype == FFI_U64);
        if (!same || size[o] == 0 || (o < num_keys && !key_type(a->dtype, &keys[o], &values)))
            return fail(frame, FFI_ERR_INVALID_ARGUMENT,
                        "ember_sort: the operands and results must share one shape and their dtypes, keys being "
                        "pred, integers or f16/bf16/f32/f64, the others of 1, 2, 4, 8 or 16 bytes, positions integers "
                        "of 4 or 8 bytes");
        in[o] = written ? NULL : a->data;
        out[o] = r->data;
    }
    if (total == 0 || n == 0) return NULL;
    int64_t rows = total / n;
    int threads = cpu_count(), chunks = 1;
    int64_t workers = rows < threads ? rows : threads;
    if (n < PARALLEL_ROW) { /* short rows: a thread per group of rows, none for a small job */
        int64_t by_size = total / PARALLEL_ROW + 1;
        if (workers > by_size) workers = by_size;
    } else if (rows < threads) { /* long rows, fewer than the threads: each row's passes shared by all */
        workers = 1;
        chunks = threads;
    }
    size_t per = row_scratch(n);
    if (n > (INT64_MAX / 4) / (int64_t)(2 * sizeof(Pair) + sizeof(uint64_t)))
        return fail(frame, FFI_ERR_INVALID_ARGUMENT, "ember_sort: the rows are too long");
    char *scratch = (char *)malloc(per * (size_t)workers);
    Chunk *chunk = chunks > 1 ? (Chunk *)malloc(sizeof(Chunk) * (size_t)chunks) : NULL;
    if (scratch == NULL || (chunks > 1 && chunk == NULL)) {
        free(scratch);
        free(chunk);
        return fail(frame, FFI_ERR_RESOURCE_EXHAUSTED, "ember_sort: out of memory for the sort's scratch space");
    }
    Job jobs[MAX_THREADS];
    for (int64_t t = 0; t < workers; t++)
        jobs[t] = (Job){(int)n_ops, (int)num_keys, n, in, out, size, dtype, keys, rows * t / workers,
                        rows * (t + 1) / workers, scratch + per * (size_t)t, chunks, chunk, values};
    if (workers > 1) run_shares(run_rows, jobs, sizeof(Job), (int)workers);
    else run_rows(&jobs[0]);
    free(scratch);
    free(chunk);
    return NULL;
}

/* ---- top_k ------------------------------------------------------------------------------------------------
 * `custom_call @ember_sort_top_k(x) -> (values, indices)`: x [..., n] of a key type of at most 4 bytes, values
 * [..., k] of its type and indices [..., k] s32, the attribute k: per row, the k largest entries and their positions,
 * largest first, in the total order of the bits JAX's top_k uses (XLA's TopK: -NaN < -inf < ... < -0.0 < 0.0 <
 * subnormals < ... < +NaN; nothing equal but the same bits, but bf16, compared as f32 with its subnormals flushed to
 * zeros of their sign, and its NaNs given back quiet), equal entries by lower position.
 * Each entry becomes (~key << 32 | position), so the k least of those are the answer in order: for k up to a quarter
 * of the row, the k least kept in order while the row is read (4-byte entries, k <= LEAST_K on AVX2, k <= 64 without
 * a vectorized quicksort: most entries cost one compare with the k-th); else a partial quicksort where the CPU has
 * AVX-512F or AVX2 (select_sorted_u64; AVX-512F's was measured faster for k = 10 on its machine); else a scalar
 * quickselect of them (select_least_u64) and a qsort of those k, and for larger k the radix sort of the row. */
/* (AVX2, f32[1000, 1000], ms read in order against partitioned: k = 10 1.4-1.7 vs 2.4, k = 16 1.9-2.2 vs 1.7-2.7,
 * k = 20 1.7-2.6 vs 2.6-2.8, k = 24 3.5 vs 2.5, k = 64 4.4-5.4 vs 1.7-2.0) */
#define LEAST_K 16
typedef struct {
    const uint8_t *x;
    uint8_t *values;
    int32_t *indices;
    int64_t n, k, begin, end;
    int size, kind, bf16;
    uint64_t *scratch; /* 2 n items, then the radix sort's counts (TOP_K_SCRATCH) */
} TopK;
#define TOP_K_SCRATCH(n) (2 * (size_t)(n) + MAX_DIGITS * RADIX)

static inline uint64_t total_order_key(uint64_t b, int size, int kind, int bf16) {
    uint64_t sign = 1ull << (8 * size - 1), all = sign | (sign - 1);
    if (kind == KEY_UNSIGNED) return b;
    if (kind == KEY_SIGNED) return b ^ sign;
    if (bf16 && (b & 0x7f80u) == 0) b &= 0x8000u; /* (XLA's TopK compares bf16 as f32, subnormals flushed) */
    return b ^ (sign | ((0 - ((b >> (8 * size - 1)) & 1)) & all));
}

/* Moves the k least of the n distinct items of u to u[0..k) (in no order): Hoare partitions around a median of three,
 * keeping the side holding the k-th; after 2 log2(n) + 8 rounds without converging (an adversarial order) it stops
 * partitioning and returns 0, and the caller sorts the whole range instead. Returns 1 when the k least are in place. */
static int select_least_u64(uint64_t *u, int64_t n, int64_t k) {
    int64_t lo = 0, hi = n - 1;
    int rounds = 8;
    for (int64_t m = n; m > 1; m >>= 1) rounds += 2;
    while (hi > lo && k - 1 >= lo && k - 1 <= hi) {
        if (rounds-- == 0) return 0;
        int64_t mid = lo + (hi - lo) / 2;
        uint64_t a = u[lo], b = u[mid], c = u[hi];
        uint64_t pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        int64_t i = lo - 1, j = hi + 1;
        for (;;) {
            do i++; while (u[i] < pivot);
            do j--; while (u[j] > pivot);
            if (i >= j) break;
            uint64_t t = u[i]; u[i] = u[j]; u[j] = t;
        }
        /* u[lo..j] <= pivot <= u[j+1..hi] */
        if (k - 1 <= j) hi = j;
        else lo = j + 1;
    }
    return 1;
}

static int compare_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The radix sort of the n items of u by their keys (the high 32 bits), into u or other: which one it returns. */
static uint64_t *radix_sort_keys(TopK *t, uint64_t *u, uint64_t *other, int64_t n) {
    int64_t *hist = (int64_t *)(t->scratch + 2 * t->n);
    int bits = digit_bits(t->size, n), digits = digit_count(t->size, n);
    memset(hist, 0, sizeof(int64_t) * RADIX * (size_t)digits);
    for (int64_t i = 0; i < n; i++)
        for (int d = 0; d < digits; d++) hist[d * RADIX + DIGIT(u[i] >> 32, bits * d, (1u << bits) - 1)]++;
    return (uint64_t *)radix(&ITEMS_64, u, other, n, hist, t->size, 32, 1, NULL);
}

/* Inserts v into the sorted u[0..*filled) of at most k items (dropping the largest when full). */
static inline void insert_least(uint64_t *u, int64_t *filled, int64_t k, uint64_t v) {
    int64_t j = *filled < k ? (*filled)++ : k - 1;
    while (j > 0 && u[j - 1] > v) { u[j] = u[j - 1]; j--; }
    u[j] = v;
}

/* The k least items (~key << 32 | position) of a row of n 4-byte entries into u[0..k), in order, for k <= n: the
 * keys of 16 entries at a time (branch-free, so the compiler vectorizes them) against the k-th least key so far; a
 * block holding none below it costs no insertion. */
static void least_k_32(const uint32_t *x, int64_t n, int64_t k, int kind, uint64_t *u) {
    const uint32_t sign = 0x80000000u, base = kind == KEY_UNSIGNED ? 0 : sign, fm = kind == KEY_FLOAT ? ~0u : 0;
#define NEG_KEY(b) (~((b) ^ (base | ((uint32_t)((int32_t)(b) >> 31) & fm))))
    int64_t filled = 0, i = 0;
    for (; i < k; i++) insert_least(u, &filled, k, (uint64_t)NEG_KEY(x[i]) << 32 | (uint64_t)i);
    uint32_t worst = (uint32_t)(u[k - 1] >> 32);
    for (; i + 16 <= n; i += 16) {
        uint32_t least = ~0u;
        for (int j = 0; j < 16; j++) {
            uint32_t nk = NEG_KEY(x[i + j]);
            least = nk < least ? nk : least;
        }
        if (least >= worst) continue; /* (an equal key comes later: its item is larger than the k-th) */
        for (int j = 0; j < 16; j++) {
            uint32_t nk = NEG_KEY(x[i + j]);
            if (nk < worst) {
                insert_least(u, &filled, k, (uint64_t)nk << 32 | (uint64_t)(i + j));
                worst = (uint32_t)(u[k - 1] >> 32);
            }
        }
    }
    for (; i < n; i++) {
        uint32_t nk = NEG_KEY(x[i]);
        if (nk < worst) {
            insert_least(u, &filled, k, (uint64_t)nk << 32 | (uint64_t)i);
            worst = (uint32_t)(u[k - 1] >> 32);
        }
    }
#undef NEG_KEY
}

static void *run_top_k(void *arg) {
    TopK *t = (TopK *)arg;
    int64_t n = t->n, k = t->k;
    uint64_t *u = t->scratch, *other = t->scratch + n;
    uint64_t mask = (8 * t->size >= 32) ? 0xffffffffu : ((1ull << (8 * t->size)) - 1);
    /* the largest k kept in order while a row is read (4-byte entries): the others partition or sort it */
    int64_t in_order = simd_isa() == ISA_AVX512 ? 0 : simd_isa() == ISA_AVX2 ? LEAST_K : 64;
    for (int64_t r = t->begin; r < t->end; r++) {
        const uint8_t *x = t->x + r * n * t->size;
        uint64_t *sorted = u;
        if (k <= in_order && k <= n / 4 && t->size == 4 && !t->bf16) {
            least_k_32((const uint32_t *)x, n, k, t->kind, u);
        } else if (!simd_supported() && k <= 64 && k <= n / 4) {
            /* the k least so far, in order: most entries are not less than the k-th and cost one compare */
            int64_t filled = 0;
            for (int64_t i = 0; i < n; i++) {
                uint64_t v = (~total_order_key(load_bits(x, i, t->size), t->size, t->kind, t->bf16) & mask) << 32
                             | (uint64_t)i;
                if (filled == k && v >= u[k - 1]) continue;
                insert_least(u, &filled, k, v);
            }
        } else {
            for (int64_t i = 0; i < n; i++)
                u[i] = (~total_order_key(load_bits(x, i, t->size), t->size, t->kind, t->bf16) & mask) << 32
                       | (uint64_t)i;
            if (simd_supported()) select_sorted_u64(u, n, k);
            else if (k <= n / 4 && select_least_u64(u, n, k))  /* (the items are distinct in their positions) */
                qsort(u, (size_t)k, sizeof(uint64_t), compare_u64);
            else sorted = radix_sort_keys(t, u, other, n);
        }
        for (int64_t j = 0; j < k; j++) {
            int64_t at = (int64_t)(sorted[j] & 0xffffffffu);
            store_bits(t->values + r * k * t->size, j, t->size, load_bits(x, at, t->size));
            t->indices[r * k + j] = (int32_t)at;
        }
        if (t->bf16) quiet_bf16_nans((uint16_t *)t->values + r * k, k); /* (as XLA's TopK gives them) */
    }
    return NULL;
}

static Ffi_Error *top_k_handler(Ffi_CallFrame *frame) {
    if (answer_metadata(frame)) return NULL;
    if (frame->stage != FFI_EXECUTE) return NULL;
    if (frame->args.size != 1 || frame->rets.size != 2)
        return fail(frame, FFI_ERR_INVALID_ARGUMENT, "ember_sort_top_k: needs one operand and two results");
    const Ffi_Buffer *x = (const Ffi_Buffer *)frame->args.args[0];
    const Ffi_Buffer *values = (const Ffi_Buffer *)frame->rets.args[0];
    const Ffi_Buffer *indices = (const Ffi_Buffer *)frame->rets.args[1];
    int64_t k = attr_int(frame, "k", -1);
    KeyType key;
    void (*unused)(const Job *, int64_t);
    int ok = x->rank >= 1 && values->rank == x->rank && indices->rank == x->rank && values->dtype == x->dtype
             && indices->dtype == FFI_S32 && key_type(x->dtype, &key, &unused) && key.size <= 4;
    int64_t n = ok ? x->dims[x->rank - 1] : 0;
    ok = ok && k >= 0 && k <= n && n <= (int64_t)INT32_MAX;
    for (int64_t d = 0; ok && d < x->rank; d++) {
        int64_t want = d + 1 == x->rank ? k : x->dims[d];
        ok = values->dims[d] == want && indices->dims[d] == want;
    }
    if (!ok)
        return fail(frame, FFI_ERR_INVALID_ARGUMENT,
                    "ember_sort_top_k: the operand [..., n] (of at most 4 bytes) and the results [..., k] (its type, "
                    "int32) disagree, or k is not between 0 and n");
    int64_t total = element_count(x), rows = n > 0 ? total / n : 0;
    if (rows == 0 || k == 0) return NULL;
    int64_t workers = rows < cpu_count() ? rows : cpu_count(), by_size = total / PARALLEL_ROW + 1;
    if (workers > by_size) workers = by_size;
    uint64_t *scratch = (uint64_t *)malloc(TOP_K_SCRATCH(n) * sizeof(uint64_t) * (size_t)workers);
    if (scratch == NULL) return fail(frame, FFI_ERR_RESOURCE_EXHAUSTED, "ember_sort_top_k: out of memory");
    TopK jobs[MAX_THREADS];
    for (int64_t t = 0; t < workers; t++)
        jobs[t] = (TopK){(const uint8_t *)x->data, (uint8_t *)values->data, (int32_t *)indices->data, n, k,
                         rows * t / workers, rows * (t + 1) / workers, key.size, key.kind, x->dtype == FFI_BF16,
                         scratch + TOP_K_SCRATCH(n) * (size_t)t};
    run_shares(run_top_k, jobs, sizeof(TopK), (int)workers);
    free(scratch);
    return NULL;
}

/* ---- module ------------------------------------------------------------------------------------------------ */
static PyObject *handlers(PyObject *self, PyObject *unused) {
    (void)self; (void)unused;
    static const Ffi_HandlerEntry table[] = {{"ember_sort", (void *)sort_handler},
                                             {"ember_sort_top_k", (void *)top_k_handler}};
    return handler_dict(table, sizeof table / sizeof table[0]);
}

static PyObject *set_isa(PyObject *self, PyObject *arg) {
    (void)self;
    const char *name = PyUnicode_Check(arg) ? PyUnicode_AsUTF8(arg) : NULL;
    int want = -1;
    for (int i = 0; name != NULL && i < 3; i++)
        if (strcmp(name, isa_names[i]) == 0) want = i;
    if (arg == Py_None) want = -2;
    if (want == -1) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_ValueError, "set_isa: expected None or one of 'portable', 'avx2', 'avx512f', got %R",
                         arg);
        return NULL;
    }
    if (want >= 0 && want > detected_isa()) {
        PyErr_Format(PyExc_ValueError, "set_isa: this CPU cannot run the %s kernel (it runs %s)", isa_names[want],
                     isa_names[detected_isa()]);
        return NULL;
    }
    const char *before = isa_names[simd_isa()];
    isa_forced = want >= 0 ? want : -1;
    return PyUnicode_FromString(before);
}

static PyObject *isa(PyObject *self, PyObject *unused) {
    (void)self; (void)unused;
    return PyUnicode_FromString(isa_names[simd_isa()]);
}

static PyMethodDef methods[] = {
    {"handlers", handlers, METH_NOARGS, "The FFI handlers: {custom-call target name: handler address}."},
    {"isa", isa, METH_NOARGS, "isa(): the quicksort kernel the sorts use ('avx512f', 'avx2'), or 'portable' (the radix "
                              "sort alone)."},
    {"set_isa", set_isa, METH_O, "set_isa(name): the kernel the sorts use, one this CPU runs ('portable': the radix "
                                 "sort alone; None: the CPU's best), for the tests of each path; returns the one "
                                 "used before."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "ember._runtime._sort",
    "ember's sort kernel as an XLA FFI handler (see the comment at the top of _sort.c).", -1, methods,
};

PyMODINIT_FUNC PyInit__sort(void) {
    make_compressions();
    return PyModule_Create(&module_def);
}
