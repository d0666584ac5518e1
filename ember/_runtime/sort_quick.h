/* The quicksort around a vectorized kernel, included by _sort.c once per kernel (sort_avx512.h, sort_avx2.h) and key
 * width, after the kernel: SIMD_T (uint32_t or uint64_t), SIMD_SUF (the functions' suffix), SIMD_TARGET (the
 * functions' target attribute) and SIMD_BASE (the longest segment the kernel's `small` sorts) are defined, and the
 * kernel's `small(a, n)` (a[0..n) sorted, n <= SIMD_BASE) and `partition(a, n, pivot)` (the keys below pivot first;
 * returns how many, n >= 2 SIMD_UNROLL vectors) are too.
 *
 * Keys are sorted ascending, in place, not stably (the callers make every equal key the same bits, or every item
 * distinct). A segment of at most SIMD_BASE keys is the kernel's; a longer one is partitioned around the median of an
 * even sample of 64 keys (SIMD_BASE if fewer), the shorter side sorted recursively and the longer one in the loop; a
 * pivot that is the segment's minimum splits off the keys equal to it instead (many equal keys end the recursion);
 * past quick_depth(n) levels the segment is heap-sorted (no input makes it quadratic). */
#define SIMD_SAMPLES (SIMD_BASE < 64 ? SIMD_BASE : 64)

/* The median of keys sampled evenly from a[0..n) (n > SIMD_BASE): SIMD_SAMPLES of them, 16 in a segment shorter than
 * 64 SIMD_SAMPLES (where a better pivot saves less than it costs). */
SIMD_TARGET static SIMD_T SIMD_FN(pivot)(const SIMD_T *a, int64_t n) {
    SIMD_T sample[SIMD_SAMPLES];
    int count = n >= 64 * SIMD_SAMPLES ? SIMD_SAMPLES : 16;
    int64_t step = n / count;
    for (int i = 0; i < count; i++) sample[i] = a[step / 2 + i * step];
    SIMD_FN(small)(sample, count);
    return sample[count / 2];
}

static void SIMD_FN(heapsort)(SIMD_T *a, int64_t n) {
    for (int64_t start = n / 2 - 1, end = n; end > 1;) {
        int64_t root;
        if (start >= 0) root = start--;
        else {
            SIMD_T t = a[0];
            a[0] = a[--end];
            a[end] = t;
            root = 0;
        }
        for (int64_t child; (child = 2 * root + 1) < end; root = child) {
            if (child + 1 < end && a[child] < a[child + 1]) child++;
            if (a[root] >= a[child]) break;
            SIMD_T t = a[root];
            a[root] = a[child];
            a[child] = t;
        }
    }
}

/* a[0..n) sorted (depth: partition levels left before heap sort takes over). */
SIMD_TARGET static void SIMD_FN(quicksort)(SIMD_T *a, int64_t n, int depth) {
    while (n > SIMD_BASE) {
        if (depth-- <= 0) {
            SIMD_FN(heapsort)(a, n);
            return;
        }
        SIMD_T pivot = SIMD_FN(pivot)(a, n);
        int64_t m = SIMD_FN(partition)(a, n, pivot);
        if (m == 0) { /* the pivot is the least key: the keys equal to it are done */
            if (pivot == (SIMD_T)~(SIMD_T)0) return; /* (all are the largest key) */
            m = SIMD_FN(partition)(a, n, pivot + 1);
            a += m;
            n -= m;
            continue;
        }
        if (m < n - m) {
            SIMD_FN(quicksort)(a, m, depth);
            a += m;
            n -= m;
        } else {
            SIMD_FN(quicksort)(a + m, n - m, depth);
            n = m;
        }
    }
    SIMD_FN(small)(a, n);
}

/* a[0..n) rearranged so that its k least keys come first, sorted (a partial quicksort: only the side holding
 * position k is partitioned further). */
__attribute__((unused)) SIMD_TARGET static void SIMD_FN(select_sorted)(SIMD_T *a, int64_t n, int64_t k, int depth) {
    SIMD_T *base = a;
    int64_t want = k;
    while (n > SIMD_BASE && k > 0 && k < n) {
        if (depth-- <= 0) {
            SIMD_FN(heapsort)(a, n);
            break;
        }
        SIMD_T pivot = SIMD_FN(pivot)(a, n);
        int64_t m = SIMD_FN(partition)(a, n, pivot);
        if (m == 0) { /* the pivot is the least key: the keys equal to it first */
            if (pivot == (SIMD_T)~(SIMD_T)0) break;
            m = SIMD_FN(partition)(a, n, pivot + 1);
        }
        if (m >= k) n = m; /* the k least are among the first m */
        else {
            a += m;
            n -= m;
            k -= m;
        }
    }
    if (n <= SIMD_BASE) SIMD_FN(small)(a, n);
    SIMD_FN(quicksort)(base, want, quick_depth(want));
}

/* A share of a sort split among threads: a segment, sorted by one of them. */
typedef struct {
    SIMD_T *a;
    int64_t n;
} SIMD_FN(Segment);

static void *SIMD_FN(run_segment)(void *arg) {
    SIMD_FN(Segment) *s = (SIMD_FN(Segment) *)arg;
    SIMD_FN(quicksort)(s->a, s->n, quick_depth(s->n));
    return NULL;
}

/* a[0..n) sorted by `threads` threads: partitioned (the longest segment at a time) into as many segments as
 * threads, each then sorted by one. */
SIMD_TARGET static void SIMD_FN(sort)(SIMD_T *a, int64_t n, int threads) {
    if (threads <= 1 || n <= 4 * SIMD_BASE) {
        SIMD_FN(quicksort)(a, n, quick_depth(n));
        return;
    }
    SIMD_FN(Segment) segments[MAX_THREADS];
    int count = 1;
    segments[0] = (SIMD_FN(Segment)){a, n};
    while (count < threads) {
        int longest = 0;
        for (int i = 1; i < count; i++)
            if (segments[i].n > segments[longest].n) longest = i;
        SIMD_FN(Segment) s = segments[longest];
        if (s.n <= 4 * SIMD_BASE) break;
        SIMD_T pivot = SIMD_FN(pivot)(s.a, s.n);
        int64_t m = SIMD_FN(partition)(s.a, s.n, pivot);
        if (m == 0) {
            if (pivot == (SIMD_T)~(SIMD_T)0) break;
            m = SIMD_FN(partition)(s.a, s.n, pivot + 1); /* (the first m keys, equal, are done: left as a segment) */
        }
        segments[longest] = (SIMD_FN(Segment)){s.a, m};
        segments[count++] = (SIMD_FN(Segment)){s.a + m, s.n - m};
    }
    run_shares(SIMD_FN(run_segment), segments, sizeof(segments[0]), count);
}

#undef SIMD_SAMPLES
