/* The AVX2 kernel of the quicksort (sort_quick.h), included by _sort.c once per width: SIMD_T (uint32_t or uint64_t),
 * SIMD_LANES (8 or 4 per 256-bit vector), SIMD_LOG_LANES, SIMD_SUF, SIMD_TARGET, SIMD_BASE_VECTORS and these
 * operations on __m256i are defined before each inclusion:
 *   SIMD_PIVOT(p)        p prepared for SIMD_BELOW;     SIMD_BELOW(v, pv)  the lanes of v below p, a bit each;
 *   SIMD_COMPRESSION(m)  the lane permutation (_mm256_permutevar8x32_epi32's indices) that puts the lanes of mask m
 *                        first and the others after them, each in its order;
 *   SIMD_IN(v), SIMD_OUT(v)  a vector of keys into and out of the bitonic network's form (u64: the sign bit flipped,
 *                        so that AVX2's signed compare orders them), SIMD_MIN/SIMD_MAX in that form;
 *   SIMD_PARTNER(v, j)   lane i of v moved to lane i ^ j (j < SIMD_LANES);
 *   SIMD_LANE_MASK(m)    a vector whose lanes in mask m are all ones, the others zero;
 *   SIMD_SORT_COLUMNS(c) c[0..SIMD_LANES) sorted lane by lane (a sorting network of SIMD_EXCHANGEs),
 *   SIMD_TRANSPOSE(c)    c[0..SIMD_LANES) transposed, SIMD_REVERSE(v) v's lanes reversed;
 *   SIMD_SPLIT_LO/HI(a, b, j), SIMD_JOIN_LO/HI(lo, hi, j): see bitonic below.
 *
 * AVX2 has no compressing store and no mask registers: a partition permutes each vector so that its keys below the
 * pivot come first (a table of permutations by the compare's bits) and stores the whole vector at both ends, the
 * left end taking its first keys and the right end its last ones; both ends always have a vector's room (the first
 * and last SIMD_UNROLL vectors are read before any store), and the last keys (those vectors and a tail shorter than
 * a vector, where the two ends meet) go through a buffer on the stack. A segment of at most SIMD_BASE_VECTORS vectors
 * is sorted by a bitonic network in registers (see bitonic). AVX2's masked loads and stores are not used: they are
 * microcoded on AMD's CPUs (the base case took 1.6x as long with them). Also the key transforms. */
#define SIMD_BASE (SIMD_BASE_VECTORS * SIMD_LANES)
#define SIMD_ALL ((1u << SIMD_LANES) - 1)

/* A compare-exchange of registers x and y (x takes the lesser keys, lane by lane). */
#define SIMD_EXCHANGE(x, y)                                                                          \
    do {                                                                                             \
        __m256i lo_ = SIMD_MIN(x, y);                                                                \
        y = SIMD_MAX(x, y);                                                                          \
        x = lo_;                                                                                     \
    } while (0)

/* v[0..R) (R a power of 2, R * SIMD_LANES = 2^log_n) sorted as one sequence, lane by lane, register by register:
 * the bitonic network, each step a compare-exchange of keys j apart in blocks of k (ascending where the key's index
 * has bit k clear). With at least SIMD_LANES registers its first stages (the blocks of one register) are a sorting
 * network down each lane of SIMD_LANES registers and a transpose (each register then one sorted column, every other
 * one reversed), and the later stages' steps within registers take two registers of one direction at a time
 * (SIMD_SPLIT_LO/HI gather the keys j apart from the two, SIMD_JOIN_LO/HI put them back: 3 instructions a register
 * instead of 4). */
SIMD_TARGET static inline __attribute__((always_inline)) void SIMD_FN(bitonic)(__m256i *v, int R, int log_n) {
    int first = 1;
    if (R >= SIMD_LANES) {
#pragma GCC unroll 16
        for (int g = 0; g < R; g += SIMD_LANES) {
            __m256i *c = v + g;
            SIMD_SORT_COLUMNS(c);
            SIMD_TRANSPOSE(c);
#pragma GCC unroll 16
            for (int r = 1; r < SIMD_LANES; r += 2) c[r] = SIMD_REVERSE(c[r]);
        }
        first = SIMD_LOG_LANES + 1;
    }
#pragma GCC unroll 16
    for (int kb = first; kb <= log_n; kb++)
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
                    __m256i lo = SIMD_MIN(v[r], v[r2]), hi = SIMD_MAX(v[r], v[r2]);
                    v[r] = ascending ? lo : hi;
                    v[r2] = ascending ? hi : lo;
                }
            } else if (k > SIMD_LANES) { /* within registers r and r + 1, of one direction */
#pragma GCC unroll 16
                for (int r = 0; r < R; r += 2) {
                    __m256i x = SIMD_SPLIT_LO(v[r], v[r + 1], j), y = SIMD_SPLIT_HI(v[r], v[r + 1], j);
                    __m256i lo = SIMD_MIN(x, y), hi = SIMD_MAX(x, y);
                    if (((r * SIMD_LANES) & k) != 0) {
                        __m256i t = lo;
                        lo = hi;
                        hi = t;
                    }
                    v[r] = SIMD_JOIN_LO(lo, hi, j);
                    v[r + 1] = SIMD_JOIN_HI(lo, hi, j);
                }
            } else { /* within each register: lane i with lane i ^ j */
#pragma GCC unroll 16
                for (int r = 0; r < R; r++) {
                    unsigned takes_min = 0; /* (constant once unrolled) */
                    for (int i = 0; i < SIMD_LANES; i++) {
                        int index = r * SIMD_LANES + i;
                        takes_min |= (unsigned)(((index & j) == 0) == ((index & k) == 0)) << i;
                    }
                    __m256i w = SIMD_PARTNER(v[r], j);
                    v[r] = _mm256_blendv_epi8(SIMD_MAX(v[r], w), SIMD_MIN(v[r], w), SIMD_LANE_MASK(takes_min));
                }
            }
        }
}

/* a[0..n) sorted for n <= SIMD_BASE: loaded into as many registers as a power of 2 holds, padded with the largest
 * key (which sorts last and is not stored back). */
SIMD_TARGET static void SIMD_FN(small)(SIMD_T *a, int64_t n) {
    if (n < 2) return;
    __m256i v[SIMD_BASE_VECTORS];
    int R = 1;
    while (R * SIMD_LANES < n) R <<= 1;
    for (int r = 0; r < R; r++) {
        int64_t left = n - (int64_t)r * SIMD_LANES;
        if (left >= SIMD_LANES) v[r] = SIMD_IN(_mm256_loadu_si256((const __m256i *)(a + r * SIMD_LANES)));
        else { /* (through a copy: AVX2's masked loads and stores are slow on some CPUs) */
            SIMD_T part[SIMD_LANES];
            for (int i = 0; i < SIMD_LANES; i++) part[i] = i < left ? a[r * SIMD_LANES + i] : (SIMD_T)~(SIMD_T)0;
            v[r] = SIMD_IN(_mm256_loadu_si256((const __m256i *)part));
        }
    }
    switch (R) { /* (R a constant in each: the network unrolled, the keys kept in registers) */
        case 1: SIMD_FN(bitonic)(v, 1, SIMD_LOG_LANES); break;
        case 2: SIMD_FN(bitonic)(v, 2, SIMD_LOG_LANES + 1); break;
        case 4: SIMD_FN(bitonic)(v, 4, SIMD_LOG_LANES + 2); break;
#if SIMD_BASE_VECTORS >= 16
        case 8: SIMD_FN(bitonic)(v, 8, SIMD_LOG_LANES + 3); break;
        default: SIMD_FN(bitonic)(v, 16, SIMD_LOG_LANES + 4); break;
#else
        default: SIMD_FN(bitonic)(v, 8, SIMD_LOG_LANES + 3); break;
#endif
    }
    for (int r = 0; r < R; r++) {
        int64_t left = n - (int64_t)r * SIMD_LANES;
        if (left >= SIMD_LANES) _mm256_storeu_si256((__m256i *)(a + r * SIMD_LANES), SIMD_OUT(v[r]));
        else if (left > 0) {
            SIMD_T part[SIMD_LANES];
            _mm256_storeu_si256((__m256i *)part, SIMD_OUT(v[r]));
            memcpy(a + r * SIMD_LANES, part, (size_t)left * sizeof(SIMD_T));
        }
    }
}

/* One vector's keys, all unread no more, permuted so that those below the pivot come first and stored whole at both
 * ends: the left end keeps the first ones, the right end the last ones (each end has a vector's room). */
#define SIMD_SPLIT(vec)                                                                              \
    do {                                                                                             \
        unsigned below_ = SIMD_BELOW(vec, pivot_v);                                                  \
        __m256i p_ = _mm256_permutevar8x32_epi32(vec, SIMD_COMPRESSION(below_));                     \
        int count_ = __builtin_popcount(below_);                                                     \
        _mm256_storeu_si256((__m256i *)(a + wl), p_);                                                \
        _mm256_storeu_si256((__m256i *)(a + wr - SIMD_LANES), p_);                                   \
        wl += count_;                                                                                \
        wr -= SIMD_LANES - count_;                                                                   \
    } while (0)

/* The same for the lanes `valid` of a vector into the buffers below[] and above[] (filled from their starts), for the
 * last keys of a partition. */
#define SIMD_SPLIT_BUFFERED(vec, valid)                                                              \
    do {                                                                                             \
        __m256i v_ = (vec);                                                                          \
        unsigned below_ = SIMD_BELOW(v_, pivot_v) & (valid), above_ = ~below_ & (valid);              \
        _mm256_storeu_si256((__m256i *)(below + nb), _mm256_permutevar8x32_epi32(v_, SIMD_COMPRESSION(below_))); \
        _mm256_storeu_si256((__m256i *)(above + na), _mm256_permutevar8x32_epi32(v_, SIMD_COMPRESSION(above_))); \
        nb += __builtin_popcount(below_);                                                            \
        na += __builtin_popcount(above_);                                                            \
    } while (0)

/* a[0..n) (n >= 2 SIMD_UNROLL vectors) rearranged so that the keys below pivot come first; returns how many they
 * are. SIMD_UNROLL vectors at a time, from the end with less room. */
#define SIMD_UNROLL 4
SIMD_TARGET static int64_t SIMD_FN(partition)(SIMD_T *a, int64_t n, SIMD_T pivot) {
    if (pivot == 0) return 0;
    __m256i pivot_v = SIMD_PIVOT(pivot), first[SIMD_UNROLL], last[SIMD_UNROLL];
    for (int u = 0; u < SIMD_UNROLL; u++) {
        first[u] = _mm256_loadu_si256((const __m256i *)(a + u * SIMD_LANES));
        last[u] = _mm256_loadu_si256((const __m256i *)(a + n - (u + 1) * SIMD_LANES));
    }
    /* unread: [l, r); free: [wl, l) and [r, wr), 2 SIMD_UNROLL vectors' room in all, at least one on each side
     * whenever a vector is stored */
    int64_t l = SIMD_UNROLL * SIMD_LANES, r = n - SIMD_UNROLL * SIMD_LANES, wl = 0, wr = n;
    while (r - l >= SIMD_UNROLL * SIMD_LANES) {
        __m256i v[SIMD_UNROLL];
        const SIMD_T *from;
        if (l - wl <= wr - r) {
            from = a + l;
            l += SIMD_UNROLL * SIMD_LANES;
        } else {
            r -= SIMD_UNROLL * SIMD_LANES;
            from = a + r;
        }
        for (int u = 0; u < SIMD_UNROLL; u++) v[u] = _mm256_loadu_si256((const __m256i *)(from + u * SIMD_LANES));
        for (int u = 0; u < SIMD_UNROLL; u++) SIMD_SPLIT(v[u]);
    }
    while (r - l >= SIMD_LANES) {
        __m256i v;
        if (l - wl <= wr - r) {
            v = _mm256_loadu_si256((const __m256i *)(a + l));
            l += SIMD_LANES;
        } else {
            r -= SIMD_LANES;
            v = _mm256_loadu_si256((const __m256i *)(a + r));
        }
        SIMD_SPLIT(v);
    }
    /* the tail and the vectors kept: wr - wl keys, where the two ends meet */
    SIMD_T below[(2 * SIMD_UNROLL + 2) * SIMD_LANES], above[(2 * SIMD_UNROLL + 2) * SIMD_LANES];
    int64_t nb = 0, na = 0;
    if (r > l) { /* (the tail's lanes past r - l left out of both) */
        SIMD_T part[SIMD_LANES] = {0};
        memcpy(part, a + l, (size_t)(r - l) * sizeof(SIMD_T));
        SIMD_SPLIT_BUFFERED(_mm256_loadu_si256((const __m256i *)part), (1u << (r - l)) - 1);
    }
    for (int u = 0; u < SIMD_UNROLL; u++) {
        SIMD_SPLIT_BUFFERED(first[u], SIMD_ALL);
        SIMD_SPLIT_BUFFERED(last[u], SIMD_ALL);
    }
    memcpy(a + wl, below, (size_t)nb * sizeof(SIMD_T));
    memcpy(a + wl + nb, above, (size_t)na * sizeof(SIMD_T));
    return wl + nb;
}
#undef SIMD_UNROLL

/* dst[i] = the key of src[i] (to_key, a vector at a time; dst may be src). */
SIMD_TARGET static void SIMD_FN(to_keys)(const SIMD_T *src, SIMD_T *dst, int64_t n, const KeyType *t) {
    __m256i sign = SIMD_SET1(t->sign), exp = SIMD_SET1(t->exp), low = SIMD_SET1(t->sign - 1);
    __m256i zero = _mm256_setzero_si256();
    int64_t i = 0;
    for (; i + SIMD_LANES <= n; i += SIMD_LANES) {
        __m256i b = _mm256_loadu_si256((const __m256i *)(src + i)), k = b;
        if (t->kind == KEY_SIGNED) k = _mm256_xor_si256(b, sign);
        else if (t->kind == KEY_FLOAT) {
            k = _mm256_xor_si256(b, _mm256_or_si256(SIMD_NEGATIVE(b), sign));
            __m256i mag = _mm256_and_si256(b, low);
            __m256i zero_class = SIMD_EQ(t->flush ? _mm256_and_si256(mag, exp) : mag, zero);
            k = _mm256_blendv_epi8(k, sign, zero_class);
            k = _mm256_or_si256(k, SIMD_GT(mag, exp)); /* (NaN: all ones, the largest key) */
        }
        _mm256_storeu_si256((__m256i *)(dst + i), k);
    }
    for (; i < n; i++) dst[i] = (SIMD_T)to_key(src[i], t);
}

/* a[i] = the bits of key a[i] (from_key, in place). */
SIMD_TARGET static void SIMD_FN(from_keys)(SIMD_T *a, int64_t n, const KeyType *t) {
    __m256i sign = SIMD_SET1(t->sign), ones = _mm256_set1_epi32(-1);
    int64_t i = 0;
    for (; i + SIMD_LANES <= n; i += SIMD_LANES) {
        __m256i k = _mm256_loadu_si256((const __m256i *)(a + i)), b = k;
        if (t->kind == KEY_SIGNED) b = _mm256_xor_si256(k, sign);
        else if (t->kind == KEY_FLOAT) /* k ^ (sign | (all where k's top bit is clear)) */
            b = _mm256_xor_si256(k, _mm256_or_si256(_mm256_xor_si256(SIMD_NEGATIVE(k), ones), sign));
        _mm256_storeu_si256((__m256i *)(a + i), b);
    }
    for (; i < n; i++) a[i] = (SIMD_T)from_key(a[i], t);
}

#undef SIMD_SPLIT
#undef SIMD_EXCHANGE
#undef SIMD_SPLIT_BUFFERED
#undef SIMD_ALL
