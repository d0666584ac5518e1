/* ember/_runtime/vmath.h: vectorized float32 transcendentals, written once with GCC vector extensions (no
 * intrinsics) and instantiated per vector width by the file that includes it (_vmath.c).
 *
 * The includer defines, before each inclusion:
 *   VW          lanes per vector (8: one AVX2 register of floats; 16: one AVX-512 register);
 *   VM_TARGET   the function attribute of the instantiation (target("avx2,fma") or target("avx512f"));
 *   VM_SUFFIX   a name suffix, so that several instantiations live in one file (VM(sin_array) -> sin_array_avx2).
 * and gets, per instantiation, `void VM(NAME_array)(const float *x, float *y, int64_t n)` for NAME in sin, cos,
 * tan, tanh, log1p, erf_inv, exp, log, expm1, erf, logistic (y may equal x).
 *
 * Why double precision inside: the plugin's XLA computes sin and cos to 0.56 ulp and tan to 0.86 ulp (measured over
 * f32[2^22] against float64); a float polynomial after a float range reduction rounds twice (the reduced argument,
 * then the result) and reaches ~1 ulp. Each float vector is therefore split into two halves of VW/2 doubles (one
 * register each: GCC 12 scalarizes comparisons of double vectors wider than a register, which made sin 6x slower),
 * each computed to a relative error below 1e-10 and rounded once to float: within 0.5 ulp plus 2^-30 (tests/
 * test_vmath.py sweeps 4M random bit patterns and each function's range) for sin, cos, tan, tanh, exp, log, expm1,
 * erf and logistic. That costs about twice a float evaluation (one thread, AVX2: ~2.5 ns an element for sin, where
 * the plugin's XLA takes ~12 ns through libm). log1p and erf_inv, whose XLA errors are 2.4 and 65 ulp, trade some of
 * that for speed: log1p is all float (0.80 ulp, 1.0 ns an element; in double 0.50 ulp, 3.0 ns), erf_inv too (1.85
 * ulp, 2.2 ns; its log in float and its polynomial in double: 1.05 ulp, 4.5 ns; all double 0.50 ulp, 6 ns; one
 * float polynomial in a centered variable on [0, 6.25]: 4.3 ulp, its cancellation near w = 0). Which ops are lowered
 * to the kernel: ember/_hlo/backend_forms.py, KERNEL_OPS (measured).
 *
 * Denormals as XLA's CPU code treats them (it runs with FTZ and DAZ set; measured on the plugin): a subnormal input
 * of sin, tan, tanh and expm1 comes back unchanged (XLA's small-argument branch passes x through), of log1p, erf and
 * erf_inv as a zero of its sign, of cos, exp, logistic and log as the function of zero; a result below FLT_MIN in
 * magnitude becomes a zero of its sign. Those rules are written out here with integer bit tests, so the results do
 * not depend on the caller's MXCSR. -0.0 gives -0.0 where the function is odd, NaN gives NaN, +-inf the limits
 * (sin, cos, tan of +-inf: NaN; erf(+-inf) = +-1, where XLA's gives +-0.99999982).
 *
 * sin, cos, tan reduce x by Cody-Waite in double: n = round(x * 2/pi), r = x - n*P1 - n*P2 - n*P3 with pi/2 in three
 * parts, P1 and P2 of 28 significant bits (n*P1 and n*P2 exact for |n| < 2^24, x - n*P1 exact), P3 the next 53 bits:
 * r is within 2^-80 of the exact remainder for |x| < 2^24, far inside a float ulp of the result even where r is
 * smallest. Lanes of |x| >= 2^24 (finite) are rare in practice and go to libm's double sin, cos or tan (its
 * Payne-Hanek reduction), one lane at a time.
 *
 * The polynomials: Taylor series where the interval is small enough (sin and cos on [-pi/4, pi/4], degree 11 and
 * 12: truncation below 1e-11; exp's on |r| <= ln2/2, degree 9: below 1e-11; expm1's on |x| < 0.35, degree 11:
 * below 1e-14; log's atanh series in f = (m-1)/(m+1), |f| < 0.172, through f^13: below 1e-12; erf on [0, 1], 16
 * terms: below 2e-14), and least-squares Chebyshev fits (ember's own, made with mpmath at 30 digits: erf on [1, 4],
 * erf_inv's erfinv(x)/x as a polynomial of w = -log(1 - x^2) on [6.25, 16.25]) of relative error below 7e-11, given
 * in the scaled variable of their interval; erf_inv's float fits on [0, 3] and [3, 6.25] (relative error below 7e-10,
 * in w and w - 3: every term small beside the last two, so nothing cancels) are given in float. Long double
 * polynomials are evaluated as two Horner chains (VM(poly)), whose latency, not the arithmetic, bounded them. */

/* ---- coefficients (highest degree first), shared by the instantiations ---- */
#ifndef EMBER_VMATH_COEFFS
#define EMBER_VMATH_COEFFS
/* erf(x) = x P(x^2) on |x| < 1: 2/sqrt(pi) (-1)^n / (n! (2n + 1)), n = 15..0 (truncation < 2e-14) */
static const double vm_erf_small[] = {
    -0x1.f56f071a885cfp-46, 0x1.f683ae4a97007p-42, -0x1.d8453cb0c46eap-38, 0x1.9e6ad5e55a730p-34,
    -0x1.51d7181c5d36dp-30, 0x1.fcc5720624c1cp-27, -0x1.5f742ec43e71ap-23, 0x1.b9e6c9dc651a3p-20,
    -0x1.f4d25c3e0c2ebp-17, 0x1.f9a326f9b89b7p-14, -0x1.c02db40040b86p-11, 0x1.565bcd0e6a53fp-8,
    -0x1.b82ce31288b51p-6, 0x1.ce2f21a042be2p-4, -0x1.812746b0379e7p-2, 0x1.20dd750429b6dp+0
};
/* erf on [1.0, 4.0]: degree 18 in u = (t - 2.5) / 1.5, max relative error 1.32e-11 */
static const double vm_erf_mid[] = {
    -0x1.025d212b1cb9bp-16, 0x1.144a1fae6317dp-15, 0x1.41b6ab65d75fap-14, -0x1.3415461759768p-12,
    0x1.a4b75fa98d67ap-14, 0x1.e1bfc6f71e3d8p-11, -0x1.e79769e9f43f0p-10, 0x1.d0fd01470518ep-12,
    0x1.2abf4a1fa59c0p-8, -0x1.3b4cb6c721d9ep-7, 0x1.b59313577eab6p-8, 0x1.2fafcb9982300p-7, -0x1.0520bf00724adp-5,
    0x1.7c8c36d95a983p-5, -0x1.659667312c8f2p-5, 0x1.cdba01e2bad58p-6, -0x1.9180557b76114p-7, 0x1.ac44a232e96f0p-9,
    0x1.ffcaa8f4bab5dp-1
};
/* erfinv(x)/x as a polynomial of w = -log(1 - x^2) in float (ember's fits, least squares reweighted towards the
 * minimax on 4000 Chebyshev nodes, float64 reference): degree 8 in w on [0, 3] (max relative error 6.7e-10) and in
 * w - 3 on [3, 6.25] (3.5e-10) */
static const float vm_erfinv_fa[] = {
    0x1.cbd19p-24f, -0x1.72d336p-20f, 0x1.43210cp-19f, 0x1.87d3dep-15f, -0x1.0ddb7ep-13f, -0x1.31fd52p-9f,
    0x1.7a7114p-7f, 0x1.db2ap-3f, 0x1.c5bf8ap-1f
};
static const float vm_erfinv_fb[] = {
    -0x1.6773ecp-26f, 0x1.5f4314p-22f, -0x1.4a8c26p-20f, -0x1.ce9bd4p-17f, 0x1.9ba9d4p-13f, -0x1.b6cf4ep-11f,
    -0x1.7809d6p-8f, 0x1.eedbe8p-3f, 0x1.9fa072p+0f
};
/* erfinv(x)/x as a function of w on [6.25, 16.25]: degree 11 in u = (t - 11.25) / 5.0, max rel. error 5.83e-11 */
static const double vm_erfinv_b[] = {
    -0x1.1508fef87e4aap-18, 0x1.17da1a038b651p-16, -0x1.288aafdaf7f7cp-15, 0x1.e93f88aa6487ep-15,
    -0x1.e4327d2768114p-15, -0x1.c0c764f6841c3p-14, 0x1.ddd627e98c4c8p-11, -0x1.09e13d1bf82f5p-8,
    0x1.131da1e27bfabp-6, -0x1.4b75d574d5451p-4, 0x1.80036ae673584p-1, 0x1.9823b1a588943p+1
};
#endif

#define VM_CAT2(a, b) a##_##b
#define VM_CAT(a, b) VM_CAT2(a, b)
#define VM(name) VM_CAT(name, VM_SUFFIX)
#define VM_FN static inline VM_TARGET __attribute__((always_inline))

/* the instantiation's vector types (names local to this inclusion, #undef'd at the end): vf holds VW floats; the
 * double work is done on its two halves, vd of VW/2 doubles (one register: GCC 12 scalarizes comparisons of double
 * vectors wider than a register, 20x slower as measured) */
typedef float VM(vf) __attribute__((vector_size(4 * VW)));
typedef int32_t VM(vi) __attribute__((vector_size(4 * VW)));
typedef float VM(vh) __attribute__((vector_size(2 * VW)));
typedef double VM(vd) __attribute__((vector_size(4 * VW)));
typedef int64_t VM(vl) __attribute__((vector_size(4 * VW)));
typedef uint64_t VM(vu) __attribute__((vector_size(4 * VW)));
#define vf VM(vf)
#define vi VM(vi)
#define vh VM(vh)
#define vd VM(vd)
#define vl VM(vl)
#define vu VM(vu)

#define VM_SIGN64 ((int64_t)0x8000000000000000LL)
#define VM_ABS64 ((int64_t)0x7fffffffffffffffLL)

/* ---- lane helpers (bitwise selects: mask lanes are all ones or all zeros) ---- */
VM_FN vd VM(sel)(vl m, vd a, vd b) { return (vd)((m & (vl)a) | (~m & (vl)b)); }
VM_FN vf VM(self)(vi m, vf a, vf b) { return (vf)((m & (vi)a) | (~m & (vi)b)); }
VM_FN vd VM(fabs)(vd x) { return (vd)((vl)x & VM_ABS64); }
VM_FN vd VM(with_sign)(vd mag, vd sign) { return (vd)((vl)mag | ((vl)sign & VM_SIGN64)); }
VM_FN vd VM(splat)(double c) { return (vd){0} + c; }

/* |x| < FLT_MIN (zero or subnormal), by the bits (so DAZ cannot change it) */
VM_FN vi VM(tiny)(vf x) { return ((vi)x & 0x7fffffff) < 0x00800000; }
/* x with subnormals as zeros of their sign (DAZ) */
VM_FN vf VM(daz)(vf x) { return VM(self)(VM(tiny)(x), (vf)((vi)x & (int32_t)0x80000000), x); }
/* the float result of double d: flushed to a zero of its sign below FLT_MIN (FTZ), else rounded once */
VM_FN vh VM(narrow)(vd d) {
    d = VM(sel)(VM(fabs)(d) < 0x1p-126, (vd)((vl)d & VM_SIGN64), d);
    return __builtin_convertvector(d, vh);
}
/* f over the float lanes of x in double: each half widened, f'd, narrowed */
#define VM_WIDE(F, x)                                                                                          \
    ({                                                                                                         \
        vf x_ = (x), out_;                                                                                     \
        vh half_[2];                                                                                           \
        __builtin_memcpy(half_, &x_, sizeof x_);                                                               \
        half_[0] = VM(narrow)(F(__builtin_convertvector(half_[0], vd)));                                       \
        half_[1] = VM(narrow)(F(__builtin_convertvector(half_[1], vd)));                                       \
        __builtin_memcpy(&out_, half_, sizeof out_);                                                           \
        out_;                                                                                                  \
    })

/* whether any lane of mask m is set */
VM_FN int VM(any)(vl m) {
    uint64_t words[VW / 2], any = 0;
    __builtin_memcpy(words, &m, sizeof words);
    for (int k = 0; k < VW / 2; k++) any |= words[k];
    return any != 0;
}

/* the polynomial with coefficients c[0..n) (highest degree first) at u, as two interleaved Horner chains in u^2
 * (even and odd terms): half the latency of one chain, which bound erf_inv (6.7 -> see bench) */
VM_FN vd VM(poly)(vd u, const double *c, unsigned n) {
    vd z = u * u, even = VM(splat)(0.0), odd = VM(splat)(0.0);
#pragma GCC unroll 32
    for (unsigned k = 0; k < n; k++) { /* c[k] is the coefficient of u^(n-1-k) */
        if ((n - 1 - k) & 1)
            odd = odd * z + c[k];
        else
            even = even * z + c[k];
    }
    return even + u * odd;
}
#define VM_POLY(u, table) VM(poly)((u), (table), sizeof(table) / sizeof((table)[0]))

/* ---- double kernels ---- */
/* exp(x) (Taylor, degree 9), x clamped to [-200, 200] (beyond: inf or 0 as float); NaN stays NaN */
VM_FN vd VM(exp_d)(vd x) {
    x = VM(sel)(x > 200.0, VM(splat)(200.0), x);
    x = VM(sel)(x < -200.0, VM(splat)(-200.0), x);
    vd t = x * 0x1.71547652b82fep+0 + 0x1.8p52; /* n + 1.5*2^52: n = round(x / ln2) in the low bits */
    vd n = t - 0x1.8p52;
    vd r = (x - n * 0x1.62e42fefa4000p-1) - n * -0x1.8432a1b0e2634p-43; /* ln2 in two parts: n*L1 exact */
    vd p = VM(splat)(1.0 / 362880);
    p = p * r + 1.0 / 40320;
    p = p * r + 1.0 / 5040;
    p = p * r + 1.0 / 720;
    p = p * r + 1.0 / 120;
    p = p * r + 1.0 / 24;
    p = p * r + 1.0 / 6;
    p = p * r + 0.5;
    p = r + (r * r) * p + 1.0;
    vd scale = (vd)(((vl)t + 1023) << 52); /* 2^n: n + 1023 in the exponent field (the low bits of t) */
    return p * scale;
}

/* expm1(x): the Taylor series (degree 11) where |x| < 0.35, exp(x) - 1 elsewhere (no cancellation there) */
VM_FN vd VM(expm1_d)(vd x) {
    vd p = VM(splat)(1.0 / 479001600);
    p = p * x + 1.0 / 39916800;
    p = p * x + 1.0 / 3628800;
    p = p * x + 1.0 / 362880;
    p = p * x + 1.0 / 40320;
    p = p * x + 1.0 / 5040;
    p = p * x + 1.0 / 720;
    p = p * x + 1.0 / 120;
    p = p * x + 1.0 / 24;
    p = p * x + 1.0 / 6;
    p = p * x + 0.5;
    vd small = x + (x * x) * p;
    return VM(sel)(VM(fabs)(x) < 0.35, small, VM(exp_d)(x) - 1.0);
}

/* log(x) for positive normal finite double x (the callers select the special cases): x = 2^k m, m in
 * [sqrt(1/2), sqrt(2)), log(m) = 2 atanh(f), f = (m - 1)/(m + 1) */
VM_FN vd VM(log_d)(vd x) {
    vu bits = (vu)x;
    vd m = (vd)((bits & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL);
    vd k = (vd)((bits >> 52) | 0x4330000000000000ULL) - (0x1p52 + 1023.0); /* the exponent, as a double */
    vl high = m > 0x1.6a09e667f3bcdp+0;
    m = VM(sel)(high, m * 0.5, m);
    k = VM(sel)(high, k + 1.0, k);
    vd f = (m - 1.0) / (m + 1.0), z = f * f;
    vd p = VM(splat)(1.0 / 13);
    p = p * z + 1.0 / 11;
    p = p * z + 1.0 / 9;
    p = p * z + 1.0 / 7;
    p = p * z + 1.0 / 5;
    p = p * z + 1.0 / 3;
    vd logm = 2.0 * f + (2.0 * f) * (z * p);
    return k * 0x1.62e42fefa39efp-1 + logm;
}

/* log(u) of a double u >= 0 from a float operation: -inf at 0, NaN below, inf at inf, NaN at NaN */
VM_FN vd VM(log_special)(vd u) {
    vd v = VM(log_d)(u);
    v = VM(sel)(u == 0.0, VM(splat)(-__builtin_inf()), v);
    v = VM(sel)(u == __builtin_inf(), u, v);
    return VM(sel)((u < 0.0) | (u != u), VM(splat)(__builtin_nan("")), v);
}

/* ---- sin, cos, tan ---- */
/* sin(r) and cos(r) for |r| <= pi/4 (+ rounding): Taylor series to degree 11 and 12 */
VM_FN vd VM(sin_r)(vd r) {
    vd z = r * r;
    vd p = VM(splat)(-1.0 / 39916800);
    p = p * z + 1.0 / 362880;
    p = p * z - 1.0 / 5040;
    p = p * z + 1.0 / 120;
    p = p * z - 1.0 / 6;
    return r + (r * z) * p;
}
VM_FN vd VM(cos_r)(vd r) {
    vd z = r * r;
    vd p = VM(splat)(1.0 / 479001600);
    p = p * z - 1.0 / 3628800;
    p = p * z + 1.0 / 40320;
    p = p * z - 1.0 / 720;
    p = p * z + 1.0 / 24;
    p = p * z - 0.5;
    return 1.0 + z * p;
}

/* x = q pi/2 + r: r (|r| <= pi/4 + rounding) and the quadrant q mod 4, for |x| < 2^24 (larger: see VM_HUGE) */
VM_FN vd VM(reduce)(vd x, vl *q) {
    vd t = x * 0x1.45f306dc9c883p-1 + 0x1.8p52;
    vd n = t - 0x1.8p52;
    *q = (vl)t & 3;
    return ((x - n * 0x1.921fb54000000p+0) - n * 0x1.10b4612000000p-30) - n * -0x1.676733ae8fe48p-60;
}

VM_FN vd VM(sin_d)(vd x) {
    vl q;
    vd r = VM(reduce)(x, &q);
    vd v = VM(sel)((q & 1) != 0, VM(cos_r)(r), VM(sin_r)(r));
    return VM(sel)((q & 2) != 0, -v, v);
}
VM_FN vd VM(cos_d)(vd x) {
    vl q;
    vd r = VM(reduce)(x, &q);
    vd v = VM(sel)((q & 1) != 0, VM(sin_r)(r), VM(cos_r)(r)); /* cos(q pi/2 + r): cos r, -sin r, -cos r, sin r */
    return VM(sel)(((q + 1) & 2) != 0, -v, v);
}
VM_FN vd VM(tan_d)(vd x) {
    vl q;
    vd r = VM(reduce)(x, &q);
    vd s = VM(sin_r)(r), c = VM(cos_r)(r);
    vl odd = (q & 1) != 0;
    return VM(sel)(odd, -c, s) / VM(sel)(odd, s, c); /* tan(r), or -cot(r) in odd quadrants */
}

/* which lanes are finite with |x| >= 2^24 (out of the reduction's range), as a mask of floats */
VM_FN vi VM(huge)(vf x) {
    vi a = (vi)x & 0x7fffffff;
    return (a >= 0x4b800000) & (a < 0x7f800000);
}

VM_FN vf VM(sin_v)(vf x) { return VM(self)(VM(tiny)(x), x, VM_WIDE(VM(sin_d), x)); }
VM_FN vf VM(cos_v)(vf x) { return VM_WIDE(VM(cos_d), VM(daz)(x)); }
VM_FN vf VM(tan_v)(vf x) { return VM(self)(VM(tiny)(x), x, VM_WIDE(VM(tan_d), x)); }

/* ---- the others ---- */
VM_FN vd VM(tanh_d)(vd d) {
    vd a = VM(fabs)(d);
    a = VM(sel)(a > 20.0, VM(splat)(20.0), a); /* (tanh is 1 in float from 9.01) */
    vd t = VM(expm1_d)(2.0 * a);
    return VM(with_sign)(t / (t + 2.0), d);
}
VM_FN vf VM(tanh_v)(vf x) { return VM(self)(VM(tiny)(x), x, VM_WIDE(VM(tanh_d), x)); }

VM_FN vf VM(exp_v)(vf x) { return VM_WIDE(VM(exp_d), VM(daz)(x)); }
VM_FN vf VM(expm1_v)(vf x) { return VM(self)(VM(tiny)(x), x, VM_WIDE(VM(expm1_d), x)); }

VM_FN vd VM(logistic_d)(vd d) { return 1.0 / (1.0 + VM(exp_d)(-d)); }
VM_FN vf VM(logistic_v)(vf x) { return VM_WIDE(VM(logistic_d), VM(daz)(x)); }

VM_FN vf VM(log_v)(vf x) { return VM_WIDE(VM(log_special), VM(daz)(x)); }

/* ---- log1p and erf_inv: float where it is accurate enough (see the top) ---- */
VM_FN vf VM(fsplat)(float c) { return (vf){0} + c; }
/* a * b + c rounded once, lane by lane (the compiler makes it one FMA instruction; an expression a * b + c is fused
 * only where the compiler chooses, and a product it has already computed is reused as it was rounded) */
VM_FN vf VM(fmaf)(vf a, vf b, vf c) {
    vf r;
    for (int i = 0; i < VW; i++) r[i] = __builtin_fmaf(a[i], b[i], c[i]);
    return r;
}

/* log(u) + c for positive normal float u (c: a correction of a few ulps of the result, added before the last
 * rounding), in float: u = 2^k m, m in [sqrt(1/2), sqrt(2)) (k and m from the bits less sqrt(1/2)'s), f = m - 1
 * (exact), s = f/(2 + f), log(1 + f) = 2 atanh(s) = f - f^2/2 + s (f^2/2 + R(s^2)) with R the atanh series through
 * s^9 (|s| < 0.172: truncation below 3e-9 of the result); ln2 in two parts (ln2_hi of 17 bits: k ln2_hi exact). */
VM_FN vf VM(logf_plus)(vf u, vf c) {
    vi t = (vi)u - 0x3f3504f3;
    vi k = t >> 23;
    vf m = (vf)((t & 0x007fffff) + 0x3f3504f3);
    vf kf = __builtin_convertvector(k, vf);
    vf f = m - 1.0f;
    vf s = f / (f + 2.0f), z = s * s;
    vf r = z * (2.0f / 3 + z * (2.0f / 5 + z * (2.0f / 7 + z * (2.0f / 9))));
    vf hfsq = 0.5f * f * f;
    return kf * 0x1.62e3p-1f + (f - (hfsq - (s * (hfsq + r) + (kf * 0x1.2fefa4p-17f + c))));
}

/* log1p(x) in float: u = 1 + x rounded, its rounding error e (exact: x - (u - 1) for x < 1, 1 - (u - x) beyond),
 * log1p(x) = log(u) + e/u; x itself for |x| < 2^-24 (zeros of their sign for subnormals) */
VM_FN vf VM(log1p_v)(vf x) {
    vf u = x + 1.0f;
    vi big = x >= 1.0f;
    vf e = VM(self)(big, 1.0f - (u - x), x - (u - 1.0f));
    vf v = VM(logf_plus)(u, e / u);
    vi ax = (vi)x & 0x7fffffff;
    v = VM(self)(ax < 0x33800000, VM(daz)(x), v);                   /* |x| < 2^-24 */
    v = VM(self)(x == -1.0f, VM(fsplat)(-__builtin_inff()), v);
    v = VM(self)((x < -1.0f) | (x != x), VM(fsplat)(__builtin_nanf("")), v);
    return VM(self)((ax == 0x7f800000) & (x > 0.0f), x, v);           /* +inf */
}

/* erf: x P(x^2) (Taylor, 16 terms) on |x| < 1, the fit on [1, 4], 1 beyond (erf is 1 in float from 3.92) */
VM_FN vd VM(erf_d)(vd d) {
    vd a = VM(fabs)(d), s = d * d;
    vd p = VM_POLY(s, vm_erf_small), m = VM_POLY((a - 2.5) * (1.0 / 1.5), vm_erf_mid);
    vd v = VM(sel)(a < 1.0, a * p, VM(sel)(a < 4.0, m, VM(splat)(1.0)));
    v = VM(sel)(a != a, d, v); /* NaN */
    return VM(with_sign)(v, d);
}
VM_FN vf VM(erf_v)(vf x) { return VM_WIDE(VM(erf_d), VM(daz)(x)); }

/* x P(w) in double for a half whose lanes have w >= 6.25 (|x| > 0.998): the fit on [6.25, 16.25] */
VM_FN vd VM(erf_inv_tail)(vd d, vd w) { return d * VM_POLY((w - 11.25) * (1.0 / 5.0), vm_erfinv_b); }

/* erf_inv(x) = x P(w), w = -log((1 - a)(1 + a)), a = |x|: w in float (1 - a exact; w's rounding moves the result
 * by ~0.5 ulp at most; XLA's 1 - x^2 loses its bits near |x| = 1, its 65 ulp), P in float by the fit of w's interval
 * (both fits by Horner, then the lane's chosen: as fast as choosing each coefficient per lane; every coefficient's
 * term is small beside the last two, so nothing cancels), in double where a lane has w >= 6.25 (rare: any() first) */
VM_FN vf VM(erf_inv_v)(vf x) {
    vf z = VM(daz)(x);
    vf a = (vf)((vi)z & 0x7fffffff);
    vf w = -VM(logf_plus)((1.0f - a) * (1.0f + a), VM(fsplat)(0.0f));
    enum { LAST = sizeof vm_erfinv_fa / sizeof vm_erfinv_fa[0] - 1 };
    vi near = w < 3.0f;
    vf t = w - 3.0f, p = VM(fsplat)(vm_erfinv_fa[0]), q = VM(fsplat)(vm_erfinv_fb[0]);
#pragma GCC unroll 16
    for (unsigned k = 1; k < LAST; k++) {
        p = p * w + vm_erfinv_fa[k];
        q = q * t + vm_erfinv_fb[k];
    }
    /* x (c + t r) with c the last coefficient and r the rest: x c split exactly into hi + lo (an FMA), so that the
     * result rounds once more only where it is small (x t r + lo) */
    vf c = VM(self)(near, VM(fsplat)(vm_erfinv_fa[LAST]), VM(fsplat)(vm_erfinv_fb[LAST]));
    vf r = VM(self)(near, p, q), u = VM(self)(near, w, t);
    vf hi = z * c, lo = VM(fmaf)(z, c, -hi);
    vf v = VM(daz)(hi + VM(fmaf)(z * u, r, lo)); /* (a result below FLT_MIN: a zero of its sign, as XLA's) */
    vi far = w >= 6.25f;
    if (VM(any)((vl)far)) { /* (a float mask is a double one's bytes) */
        vf tail;
        vh zh[2], wh[2];
        __builtin_memcpy(zh, &z, sizeof z);
        __builtin_memcpy(wh, &w, sizeof w);
        for (int h = 0; h < 2; h++)
            zh[h] = VM(narrow)(
                VM(erf_inv_tail)(__builtin_convertvector(zh[h], vd), __builtin_convertvector(wh[h], vd)));
        __builtin_memcpy(&tail, zh, sizeof tail);
        v = VM(self)(far, tail, v);
    }
    v = VM(self)(a == 1.0f, (vf)((vi)VM(fsplat)(__builtin_inff()) | ((vi)z & (int32_t)0x80000000)), v);
    v = VM(self)((a > 1.0f) | (a != a), VM(fsplat)(__builtin_nanf("")), v);
    return VM(self)(a == 0.0f, z, v); /* (+-0 and subnormals: zeros of their sign) */
}

/* ---- whole arrays ---- */
/* y[i] = f(x[i]) for i < n: whole vectors, then the tail through a zero-padded vector (y may alias x) */
#define VM_ARRAY(NAME, BODY_FIXUP)                                                                             \
    static VM_TARGET void VM(NAME##_array)(const float *x, float *y, int64_t n) {                              \
        int64_t i = 0;                                                                                         \
        for (; i + VW <= n; i += VW) {                                                                         \
            vf v, r;                                                                                           \
            __builtin_memcpy(&v, x + i, sizeof v);                                                             \
            r = VM(NAME##_v)(v);                                                                               \
            BODY_FIXUP                                                                                         \
            __builtin_memcpy(y + i, &r, sizeof r);                                                             \
        }                                                                                                      \
        if (i < n) {                                                                                           \
            float buf[VW] = {0};                                                                               \
            vf v, r;                                                                                           \
            __builtin_memcpy(buf, x + i, (size_t)(n - i) * sizeof(float));                                    \
            __builtin_memcpy(&v, buf, sizeof v);                                                               \
            r = VM(NAME##_v)(v);                                                                               \
            BODY_FIXUP                                                                                         \
            __builtin_memcpy(buf, &r, sizeof r);                                                               \
            __builtin_memcpy(y + i, buf, (size_t)(n - i) * sizeof(float));                                     \
        }                                                                                                      \
    }

/* lanes of |x| >= 2^24: libm's double function, one lane at a time (rare: any() over the mask first) */
#define VM_HUGE(LIBM)                                                                                          \
    {                                                                                                          \
        vi big = VM(huge)(v);                                                                                  \
        if (VM(any)((vl)big))                                                                                  \
            for (int k = 0; k < VW; k++)                                                                       \
                if (big[k]) r[k] = (float)LIBM((double)v[k]);                                                  \
    }

VM_ARRAY(sin, VM_HUGE(sin))
VM_ARRAY(cos, VM_HUGE(cos))
VM_ARRAY(tan, VM_HUGE(tan))
VM_ARRAY(tanh, )
VM_ARRAY(log1p, )
VM_ARRAY(erf_inv, )
VM_ARRAY(exp, )
VM_ARRAY(log, )
VM_ARRAY(expm1, )
VM_ARRAY(erf, )
VM_ARRAY(logistic, )

#undef vf
#undef vi
#undef vh
#undef vd
#undef vl
#undef vu
