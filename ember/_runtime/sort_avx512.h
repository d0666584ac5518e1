/* The AVX-512F kernel of the quicksort (sort_quick.h), included by _sort.c once per width: SIMD_T (uint32_t or
 * uint64_t), SIMD_LANES (16 or 8 per 512-bit vector), SIMD_SUF (the functions' suffix), SIMD_TARGET and the
 * intrinsics' names (SIMD_MIN, ...) are defined before each inclusion.
 *
 * A segment of at most SIMD_BASE = 16 vectors is sorted by a bitonic network in registers (padded with the largest
 * key); a partition writes each vector's keys below the pivot to the left end and the others to the right end by
 * compressing stores, reading from whichever end has less room, so that no unread key is overwritten. Also the key
 * transforms (to_key and from_key of _sort.c a vector at a time). */
#define SIMD_BASE (16 * SIMD_LANES)
#define SIMD_ALL ((SIMD_MASK)((1u << SIMD_LANES) - 1))

/* The lanes whose index has bit j clear (j < SIMD_LANES): the lower lane of each pair j apart. */
static inline SIMD_MASK SIMD_FN(lower_lanes)(int j) {
    return (SIMD_MASK)((j == 1 ? 0x5555u : j == 2 ? 0x3333u : j == 4 ? 0x0f0fu : 0x00ffu) & SIMD_ALL);
}

/* v[0..R) (R a power of 2, at most 16; R * SIMD_LANES = 2^log_n) sorted as one sequence of R * SIMD_LANES keys, lane by lane, register by
 * register: the bitonic network, each step a compare-exchange of keys j apart in blocks of k (ascending where the
 * key's index has bit k clear). */
SIMD_TARGET static inline __attribute__((always_inline)) void SIMD_FN(bitonic)(__m512i *v, int R, int log_n) {
#pragma GCC unroll 16
    for (int kb = 1; kb <= log_n; kb++)
#pragma GCC unroll 16
        for (int jb = kb - 1; jb >= 0; jb--) {
            int k = 1 << kb, j = 1 << jb;
            if (j >= SIMD_LANES) { /* between registers r and r ^ (j / lanes) */
                int rj = j / SIMD_LANES;
#pragma GCC unroll 16
                for (int r = 0; r < R; r++) {
                    int r2 = r ^ rj;
                    if (r2 < r) continue;
                    int ascending = ((r * SIMD_LANES) & k) == 0;
                    __m512i lo = SIMD_MIN(v[r], v[r2]), hi = SIMD_MAX(v[r], v[r2]);
                    v[r] = ascending ? lo : hi;
                    v[r2] = ascending ? hi : lo;
                }
            } else { /* within each register: lane i with lane i ^ j */
                __m512i partner = _mm512_loadu_si512((const void *)SIMD_FN(partners)[j == 1 ? 0 : j == 2 ? 1
                                                                                     : j == 4 ? 2 : 3]);
                SIMD_MASK lower = SIMD_FN(lower_lanes)(j);
#pragma GCC unroll 16
                for (int r = 0; r < R; r++) {
                    SIMD_MASK ascending = k < SIMD_LANES ? SIMD_FN(lower_lanes)(k)
                                                         : (((r * SIMD_LANES) & k) == 0 ? SIMD_ALL : 0);
                    SIMD_MASK takes_min = (SIMD_MASK)(~(lower ^ ascending) & SIMD_ALL);
                    __m512i w = SIMD_PERMUTE(partner, v[r]);
                    v[r] = SIMD_BLEND(takes_min, SIMD_MAX(v[r], w), SIMD_MIN(v[r], w));
                }
            }
        }
}

/* a[0..n) sorted for n <= SIMD_BASE: loaded into as many registers as a power of 2 holds, padded with the largest
 * key (which sorts last and is not stored back). */
SIMD_TARGET static void SIMD_FN(small)(SIMD_T *a, int64_t n) {
    if (n < 2) return;
    __m512i v[16];
    int R = 1;
    while (R * SIMD_LANES < n) R <<= 1;
    __m512i top = SIMD_SET1((SIMD_T)~(SIMD_T)0);
    for (int r = 0; r < R; r++) {
        int64_t left = n - (int64_t)r * SIMD_LANES;
        SIMD_MASK m = left >= SIMD_LANES ? SIMD_ALL : left > 0 ? (SIMD_MASK)((1u << left) - 1) : 0;
        v[r] = SIMD_MASKLOAD(top, m, a + r * SIMD_LANES);
    }
    switch (R) { /* (R a constant in each: the network unrolled, the keys kept in registers) */
        case 1: SIMD_FN(bitonic)(v, 1, SIMD_LOG_LANES); break;
        case 2: SIMD_FN(bitonic)(v, 2, SIMD_LOG_LANES + 1); break;
        case 4: SIMD_FN(bitonic)(v, 4, SIMD_LOG_LANES + 2); break;
        case 8: SIMD_FN(bitonic)(v, 8, SIMD_LOG_LANES + 3); break;
        default: SIMD_FN(bitonic)(v, 16, SIMD_LOG_LANES + 4); break;
    }
    for (int r = 0; r < R; r++) {
        int64_t left = n - (int64_t)r * SIMD_LANES;
        SIMD_MASK m = left >= SIMD_LANES ? SIMD_ALL : left > 0 ? (SIMD_MASK)((1u << left) - 1) : 0;
        SIMD_MASKSTORE(a + r * SIMD_LANES, m, v[r]);
    }
}

/* One vector's keys (those in `valid`) written below the pivot to the left end, the others to the right end. */
#define SIMD_SPLIT(vec, valid)                                                        \
    do {                                                                              \
        SIMD_MASK below_ = (SIMD_MASK)(SIMD_LESS(vec, pivot_v) & (valid));            \
        int count_ = __builtin_popcount((unsigned)below_);                            \
        SIMD_COMPRESS(a + wl, below_, vec);                                           \
        wl += count_;                                                                 \
        wr -= __builtin_popcount((unsigned)(valid)) - count_;                         \
        SIMD_COMPRESS(a + wr, (SIMD_MASK)(~below_ & (valid)), vec);                   \
    } while (0)

/* a[0..n) (n >= 2 SIMD_UNROLL vectors) rearranged so that the keys below pivot come first; returns how many they
 * are. SIMD_UNROLL vectors at a time (their compares independent of each other's stores), the first and last
 * SIMD_UNROLL vectors kept in registers to make room: both ends then have room for the vectors read from either. */
#define SIMD_UNROLL 4
SIMD_TARGET static int64_t SIMD_FN(partition)(SIMD_T *a, int64_t n, SIMD_T pivot) {
    __m512i pivot_v = SIMD_SET1(pivot), first[SIMD_UNROLL], last[SIMD_UNROLL];
    for (int u = 0; u < SIMD_UNROLL; u++) {
        first[u] = _mm512_loadu_si512((const void *)(a + u * SIMD_LANES));
        last[u] = _mm512_loadu_si512((const void *)(a + n - (u + 1) * SIMD_LANES));
    }
    /* unread: [l, r); free: [wl, l) and [r, wr), SIMD_UNROLL vectors' room in all on each side at least */
    int64_t l = SIMD_UNROLL * SIMD_LANES, r = n - SIMD_UNROLL * SIMD_LANES, wl = 0, wr = n;
    while (r - l >= SIMD_UNROLL * SIMD_LANES) {
        __m512i v[SIMD_UNROLL];
        const SIMD_T *from;
        if (l - wl <= wr - r) {
            from = a + l;
            l += SIMD_UNROLL * SIMD_LANES;
        } else {
            r -= SIMD_UNROLL * SIMD_LANES;
            from = a + r;
        }
        for (int u = 0; u < SIMD_UNROLL; u++) v[u] = _mm512_loadu_si512((const void *)(from + u * SIMD_LANES));
        for (int u = 0; u < SIMD_UNROLL; u++) SIMD_SPLIT(v[u], SIMD_ALL);
    }
    while (r - l >= SIMD_LANES) {
        __m512i v;
        if (l - wl <= wr - r) {
            v = _mm512_loadu_si512((const void *)(a + l));
            l += SIMD_LANES;
        } else {
            r -= SIMD_LANES;
            v = _mm512_loadu_si512((const void *)(a + r));
        }
        SIMD_SPLIT(v, SIMD_ALL);
    }
    if (r > l) {
        SIMD_MASK m = (SIMD_MASK)((1u << (r - l)) - 1);
        __m512i v = SIMD_MASKLOAD(pivot_v, m, a + l);
        SIMD_SPLIT(v, m);
    }
    for (int u = 0; u < SIMD_UNROLL; u++) {
        SIMD_SPLIT(first[u], SIMD_ALL);
        SIMD_SPLIT(last[u], SIMD_ALL);
    }
    return wl;
}
#undef SIMD_UNROLL

/* dst[i] = the key of src[i] (to_key, 16 or 8 at a time; dst may be src). */
SIMD_TARGET static void SIMD_FN(to_keys)(const SIMD_T *src, SIMD_T *dst, int64_t n, const KeyType *t) {
    __m512i sign = SIMD_SET1(t->sign), all = SIMD_SET1(t->all), exp = SIMD_SET1(t->exp), low = SIMD_SET1(t->sign - 1);
    for (int64_t i = 0; i < n; i += SIMD_LANES) {
        SIMD_MASK m = n - i >= SIMD_LANES ? SIMD_ALL : (SIMD_MASK)((1u << (n - i)) - 1);
        __m512i b = SIMD_MASKLOAD(sign, m, src + i), k = b;
        if (t->kind == KEY_SIGNED) k = _mm512_xor_si512(b, sign);
        else if (t->kind == KEY_FLOAT) {
            k = _mm512_xor_si512(b, _mm512_or_si512(SIMD_SRAI(b, 8 * (int)sizeof(SIMD_T) - 1), sign));
            __m512i mag = _mm512_and_si512(b, low);
            k = SIMD_MOV(k, t->flush ? SIMD_TESTN(mag, exp) : SIMD_TESTN(mag, mag), sign);
            k = SIMD_MOV(k, SIMD_GREATER(mag, exp), all);
        }
        SIMD_MASKSTORE(dst + i, m, k);
    }
}

/* a[i] = the bits of key a[i] (from_key, in place). */
SIMD_TARGET static void SIMD_FN(from_keys)(SIMD_T *a, int64_t n, const KeyType *t) {
    __m512i sign = SIMD_SET1(t->sign);
    for (int64_t i = 0; i < n; i += SIMD_LANES) {
        SIMD_MASK m = n - i >= SIMD_LANES ? SIMD_ALL : (SIMD_MASK)((1u << (n - i)) - 1);
        __m512i k = SIMD_MASKLOAD(sign, m, a + i), b = k;
        if (t->kind == KEY_SIGNED) b = _mm512_xor_si512(k, sign);
        else if (t->kind == KEY_FLOAT) /* k ^ (sign | (all where k's top bit is clear)) */
            b = _mm512_xor_si512(k, _mm512_or_si512(_mm512_xor_si512(SIMD_SRAI(k, 8 * (int)sizeof(SIMD_T) - 1),
                                                                     _mm512_set1_epi32(-1)), sign));
        SIMD_MASKSTORE(a + i, m, b);
    }
}

#undef SIMD_SPLIT
#undef SIMD_ALL
