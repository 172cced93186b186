/* BERT's fp32 inference kernels for x86 CPUs with AVX2 and FMA: `y = x @ W.T + b` (optionally GELU'd) on a weight
 * packed once into panels, and attention (softmax(q k^T / sqrt(d) + mask) v) with its heads merged on output.
 *
 * The GEMM is the classic blocked one: a 6 x 16 tile of y lives in twelve AVX registers while the kernel walks a
 * block of K; the weight is packed ahead of time into 16-column panels, K-block by K-block (each panel read from
 * L1), and each thread packs 6-row slices of its x block (read from L2). Threads share tasks (a block of rows x a
 * group of panels) inside the OpenMP runtime that PyTorch itself uses, taking from each other's when done early.
 * Attention runs the same tile over blocks of 48 queries: scores into L2, softmax in place, then probabilities @
 * values.
 * Built and loaded by build.py, called through avx2.py; every size is in floats, every stride in elements.
 */
#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <omp.h>

#define MR 6       /* rows of a register tile */
#define NR 16      /* columns of a register tile: two AVX registers */
#define KC_MAX 384 /* deepest K block: a 16-column panel of it is 24 KiB, within L1 */
#define MC 144     /* rows of x packed at a time: 144 x 384 floats is 216 KiB, within L2 */
#define TASKS_PER_THREAD 16 /* the GEMM's work is cut into about this many tasks a thread, */
#define MIN_TASK_FLOPS (1 << 21) /* none smaller than this */
#define CHUNK 128  /* steps summed in registers before they are added to the tile */

int64_t bvl_abi_version(void) { return 9; }

/* Depth of each K block: K split into equal blocks no deeper than KC_MAX. */
int64_t bvl_k_block(int64_t K) {
    if (K < 1) return 1;
    int64_t blocks = (K + KC_MAX - 1) / KC_MAX;
    return (K + blocks - 1) / blocks;
}

int64_t bvl_packed_floats(int64_t N, int64_t K) { return (N + NR - 1) / NR * NR * K; }

/* Panel j of W (N rows of K floats, `ldw` apart) in K blocks of kb: for each K block p0, kc rows of NR floats at
 * P + p0 * panels * NR + j * kc * NR (columns past N are zero). */
static void pack_panel(const float *W, int64_t ldw, int64_t N, int64_t K, int64_t kb, int64_t j, float *P) {
    const int64_t panels = (N + NR - 1) / NR, columns = N - j * NR < NR ? N - j * NR : NR;
    for (int64_t p0 = 0; p0 < K; p0 += kb) {
        const int64_t kc = K - p0 < kb ? K - p0 : kb;
        float *dst = P + p0 * panels * NR + j * kc * NR;
        for (int64_t k = 0; k < kc; k++, dst += NR) {
            const float *src = W + j * NR * ldw + p0 + k;
            for (int64_t r = 0; r < columns; r++) dst[r] = src[r * ldw];
            for (int64_t r = columns; r < NR; r++) dst[r] = 0.f;
        }
    }
}

/* The weight's layout for bvl_linear: every panel, K blocks of bvl_k_block(K). */
void bvl_pack_weight(const float *W, int64_t ldw, int64_t N, int64_t K, float *P, int nthreads) {
    const int64_t panels = (N + NR - 1) / NR, kb = bvl_k_block(K);
    #pragma omp parallel for num_threads(nthreads) schedule(static)
    for (int64_t j = 0; j < panels; j++) pack_panel(W, ldw, N, K, kb, j, P);
}

/* Interleave rows of x in groups of MR, k-major (rows past mc are zero). */
static void pack_rows(const float *A, int64_t lda, int64_t mc, int64_t kc, float *dst) {
    for (int64_t i0 = 0; i0 < mc; i0 += MR, dst += MR * kc) {
        const int64_t mr = mc - i0 < MR ? mc - i0 : MR;
        const float *a = A + i0 * lda;
        if (mr == MR) {
            for (int64_t k = 0; k < kc; k++) {
                dst[k * MR + 0] = a[k];
                dst[k * MR + 1] = a[lda + k];
                dst[k * MR + 2] = a[2 * lda + k];
                dst[k * MR + 3] = a[3 * lda + k];
                dst[k * MR + 4] = a[4 * lda + k];
                dst[k * MR + 5] = a[5 * lda + k];
            }
        } else {
            for (int64_t k = 0; k < kc; k++)
                for (int64_t r = 0; r < MR; r++) dst[k * MR + r] = r < mr ? a[r * lda + k] : 0.f;
        }
    }
}

/* ---- vector maths ---------------------------------------------------------------------------------------- */

/* 2^f for f in [-1/2, 1/2], to 8e-8 relative: a polynomial fitted (float64) for relative error. */
static inline __m256 pow2_fraction(__m256 f) {
    __m256 p = _mm256_set1_ps(1.5353588109e-04f);
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.3398885438e-03f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(9.6184365382e-03f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(5.5503324329e-02f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.4022647920e-01f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(6.9314720288e-01f));
    return _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
}

/* p 2^n for whole n in [-126, 127], built in the exponent bits. */
static inline __m256 times_pow2(__m256 p, __m256 n) {
    const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

/* 2^y for y <= 0, the softmax's exponential (its scale and log2 e folded into y): 0 below -126, NaN stays NaN. */
static inline __m256 exp2_ps(__m256 y) {
    const __m256 lowest = _mm256_set1_ps(-126.0f);
    const __m256 vanishes = _mm256_cmp_ps(y, lowest, _CMP_LT_OQ);
    y = _mm256_max_ps(lowest, y); /* (lowest, y): a NaN y passes through */
    const __m256 n = _mm256_round_ps(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    return _mm256_andnot_ps(vanishes, times_pow2(pow2_fraction(_mm256_sub_ps(y, n)), n));
}

/* e^x for x <= 0, GELU's tail: x = n ln 2 + r in two steps (Cody and Waite), then 2^n 2^(r log2 e); 0 below
 * -87.3, NaN stays NaN. */
static inline __m256 exp_ps(__m256 x) {
    const __m256 lowest = _mm256_set1_ps(-87.3365447f);
    const __m256 vanishes = _mm256_cmp_ps(x, lowest, _CMP_LT_OQ);
    x = _mm256_max_ps(lowest, x);
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    const __m256 f = _mm256_mul_ps(r, _mm256_set1_ps(1.44269504088896341f));
    return _mm256_andnot_ps(vanishes, times_pow2(pow2_fraction(f), n));
}

/* GELU(x) = x Phi(x), Phi the standard normal CDF, within ~2e-7 of Phi. With t = |x| / sqrt(2): for t < 1 from
 * erf's odd series, erf(t) = t P(t^2); beyond, from the tail Phi(-|x|) = exp(-t^2) R(1 / t) / 2, which has no
 * cancellation on the negative side. P and R are least-squares fits (float64) on t in [0, 1] and [1, 6]. */
static inline __m256 gelu_ps(__m256 x) {
    const __m256 t = _mm256_mul_ps(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), x), _mm256_set1_ps(0.70710678118654752f));
    const __m256 t2 = _mm256_mul_ps(t, t);
    __m256 p = _mm256_set1_ps(7.898115535e-05f);
    p = _mm256_fmadd_ps(p, t2, _mm256_set1_ps(-8.024329064e-04f));
    p = _mm256_fmadd_ps(p, t2, _mm256_set1_ps(5.190051161e-03f));
    p = _mm256_fmadd_ps(p, t2, _mm256_set1_ps(-2.685480752e-02f));
    p = _mm256_fmadd_ps(p, t2, _mm256_set1_ps(1.128361241e-01f));
    p = _mm256_fmadd_ps(p, t2, _mm256_set1_ps(-3.761262884e-01f));
    p = _mm256_fmadd_ps(p, t2, _mm256_set1_ps(1.128379167e+00f));
    const __m256 half_erf = _mm256_mul_ps(_mm256_mul_ps(t, p), _mm256_set1_ps(0.5f));
    const __m256 negative = _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ);
    const __m256 signed_half_erf = _mm256_blendv_ps(half_erf, _mm256_sub_ps(_mm256_setzero_ps(), half_erf), negative);
    const __m256 near = _mm256_add_ps(_mm256_set1_ps(0.5f), signed_half_erf);
    const __m256 tc = _mm256_min_ps(_mm256_max_ps(t, _mm256_set1_ps(1.0f)), _mm256_set1_ps(9.0f));
    const __m256 u = _mm256_div_ps(_mm256_set1_ps(1.0f), tc);
    __m256 r = _mm256_set1_ps(5.726344946e-02f);
    r = _mm256_fmadd_ps(r, u, _mm256_set1_ps(-3.239824827e-01f));
    r = _mm256_fmadd_ps(r, u, _mm256_set1_ps(7.777463536e-01f));
    r = _mm256_fmadd_ps(r, u, _mm256_set1_ps(-9.902279447e-01f));
    r = _mm256_fmadd_ps(r, u, _mm256_set1_ps(6.160224047e-01f));
    r = _mm256_fmadd_ps(r, u, _mm256_set1_ps(2.706219088e-02f));
    r = _mm256_fmadd_ps(r, u, _mm256_set1_ps(-3.052374284e-01f));
    r = _mm256_fmadd_ps(r, u, _mm256_set1_ps(5.289799864e-03f));
    r = _mm256_fmadd_ps(r, u, _mm256_set1_ps(5.636231637e-01f));
    r = _mm256_fmadd_ps(r, u, _mm256_set1_ps(2.410562498e-05f));
    const __m256 e = exp_ps(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_mul_ps(tc, tc)));
    const __m256 tail = _mm256_mul_ps(_mm256_mul_ps(e, r), _mm256_set1_ps(0.5f));
    const __m256 far = _mm256_blendv_ps(_mm256_sub_ps(_mm256_set1_ps(1.0f), tail), tail, negative);
    return _mm256_mul_ps(x, _mm256_blendv_ps(far, near, _mm256_cmp_ps(t, _mm256_set1_ps(1.0f), _CMP_LT_OQ)));
}

static inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* ln x for normal x > 0: x = m 2^e with m in [sqrt(1/2), sqrt(2)), and with u = m - 1, ln m = u - u^2/2 + u^3 P(u),
 * P a polynomial fitted (float64) for relative error on that range: within 4e-8 of ln m. */
static inline __m256 log_ps(__m256 x) {
    const __m256i bits = _mm256_castps_si256(x);
    /* m in [1, 2) from the mantissa bits; halved (and e raised by one) where m >= sqrt(2) */
    __m256 m = _mm256_castsi256_ps(_mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi32(0x007fffff)),
                                                   _mm256_set1_epi32(0x3f800000)));
    __m256 e = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(127)));
    const __m256 high = _mm256_cmp_ps(m, _mm256_set1_ps(1.41421356237f), _CMP_GE_OQ);
    m = _mm256_blendv_ps(m, _mm256_mul_ps(m, _mm256_set1_ps(0.5f)), high);
    e = _mm256_add_ps(e, _mm256_and_ps(high, _mm256_set1_ps(1.0f)));
    const __m256 u = _mm256_sub_ps(m, _mm256_set1_ps(1.0f)), u2 = _mm256_mul_ps(u, u);
    __m256 p = _mm256_set1_ps(8.507032692e-02f);
    p = _mm256_fmadd_ps(p, u, _mm256_set1_ps(-1.419762820e-01f));
    p = _mm256_fmadd_ps(p, u, _mm256_set1_ps(1.495102495e-01f));
    p = _mm256_fmadd_ps(p, u, _mm256_set1_ps(-1.658793390e-01f));
    p = _mm256_fmadd_ps(p, u, _mm256_set1_ps(1.996059120e-01f));
    p = _mm256_fmadd_ps(p, u, _mm256_set1_ps(-2.500096858e-01f));
    p = _mm256_fmadd_ps(p, u, _mm256_set1_ps(3.333397210e-01f));
    const __m256 ln_m = _mm256_fmadd_ps(_mm256_mul_ps(u2, u), p, _mm256_fnmadd_ps(u2, _mm256_set1_ps(0.5f), u));
    return _mm256_fmadd_ps(e, _mm256_set1_ps(0.693147180559945309f), ln_m);
}

/* -x ln x, 0 where x is 0 or below the smallest normal float (where -x ln x < 1e-36); NaN stays NaN (x * 0) */
static inline __m256 neg_x_log_x_ps(__m256 x) {
    const __m256 normal = _mm256_cmp_ps(x, _mm256_set1_ps(1.17549435e-38f), _CMP_GE_OQ);
    const __m256 safe = _mm256_blendv_ps(_mm256_set1_ps(1.0f), x, normal);
    const __m256 term = _mm256_and_ps(normal, _mm256_mul_ps(_mm256_sub_ps(_mm256_setzero_ps(), safe), log_ps(safe)));
    return _mm256_fmadd_ps(x, _mm256_setzero_ps(), term);
}

/* out[r] = -sum_j p[r, j] ln p[r, j] over n entries of each of `rows` rows `ld` apart: the entropy (nats) of each
 * attention distribution, in one pass over the probabilities with no copy of their logarithms. */
void bvl_entropy(const float *p, int64_t rows, int64_t n, int64_t ld, float *out, int nthreads) {
    #pragma omp parallel for num_threads(nthreads) schedule(static) if (rows * n >= (1 << 15))
    for (int64_t r = 0; r < rows; r++) {
        const float *row = p + r * ld;
        __m256 acc = _mm256_setzero_ps();
        int64_t j = 0;
        for (; j + 8 <= n; j += 8) acc = _mm256_add_ps(acc, neg_x_log_x_ps(_mm256_loadu_ps(row + j)));
        if (j < n) {
            float tail[8] = {0};
            memcpy(tail, row + j, (n - j) * sizeof(float));
            acc = _mm256_add_ps(acc, neg_x_log_x_ps(_mm256_loadu_ps(tail)));
        }
        out[r] = hsum(acc);
    }
}

/* out[r] = LayerNorm(x[r] + residual[r]) * w + b over `rows` rows of C floats: BERT's residual add and post-LN in
 * one read of each input and one write. With residual NULL, the LayerNorm of x alone with the same arithmetic (for a
 * layer whose LayerNorm a hook watches: it sees the sum, then gives the bits of the fused pass). The mean and the
 * biased variance of the centred sum are summed in fp32 over a row that stays in L1 (within 2e-6 of PyTorch's). */
void bvl_add_layer_norm(const float *x, const float *residual, int64_t rows, int64_t C, const float *w,
                        const float *b, float eps, float *out, int nthreads) {
    #pragma omp parallel for num_threads(nthreads) schedule(static) if (rows * C >= (1 << 15))
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * C, *rr = residual ? residual + r * C : NULL;
        float *o = out + r * C;
        __m256 acc = _mm256_setzero_ps();
        float tail = 0.f;
        int64_t j = 0;
        for (; j + 8 <= C; j += 8) {
            __m256 sum = _mm256_loadu_ps(xr + j);
            if (rr) sum = _mm256_add_ps(sum, _mm256_loadu_ps(rr + j));
            _mm256_storeu_ps(o + j, sum);
            acc = _mm256_add_ps(acc, sum);
        }
        for (; j < C; j++) {
            o[j] = rr ? xr[j] + rr[j] : xr[j];
            tail += o[j];
        }
        const float mean = (hsum(acc) + tail) / (float)C;
        const __m256 vmean = _mm256_set1_ps(mean);
        acc = _mm256_setzero_ps();
        tail = 0.f;
        for (j = 0; j + 8 <= C; j += 8) {
            const __m256 d = _mm256_sub_ps(_mm256_loadu_ps(o + j), vmean);
            acc = _mm256_fmadd_ps(d, d, acc);
        }
        for (; j < C; j++) tail += (o[j] - mean) * (o[j] - mean);
        const float rstd = 1.0f / sqrtf((hsum(acc) + tail) / (float)C + eps);
        const __m256 vrstd = _mm256_set1_ps(rstd);
        for (j = 0; j + 8 <= C; j += 8) {
            const __m256 normed = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(o + j), vmean), vrstd);
            _mm256_storeu_ps(o + j, _mm256_fmadd_ps(normed, _mm256_loadu_ps(w + j), _mm256_loadu_ps(b + j)));
        }
        for (; j < C; j++) o[j] = fmaf((o[j] - mean) * rstd, w[j], b[j]);
    }
}

/* y = GELU(x) over n floats: the GEMM epilogue's arithmetic, for when the GEMM's output must be seen (hooked)
 * before its GELU. */
void bvl_gelu(const float *x, float *y, int64_t n, int nthreads) {
    #pragma omp parallel for num_threads(nthreads) schedule(static) if (n >= (1 << 16))
    for (int64_t i = 0; i < n / 8 * 8; i += 8) _mm256_storeu_ps(y + i, gelu_ps(_mm256_loadu_ps(x + i)));
    if (n % 8) {
        float tail[8] = {0};
        memcpy(tail, x + n / 8 * 8, n % 8 * sizeof(float));
        _mm256_storeu_ps(tail, gelu_ps(_mm256_loadu_ps(tail)));
        memcpy(y + n / 8 * 8, tail, n % 8 * sizeof(float));
    }
}

/* ---- sharing tasks between threads ------------------------------------------------------------------------ */

/* Tasks 0 .. count-1 are dealt in contiguous shares, one per thread: consecutive tasks reuse what their thread
 * packed (a block of rows, a head's keys and values). A thread that finishes its share takes what is left of the
 * others' (one core of two was routinely slowed by a neighbour, leaving the other idle up to 11% of a call).
 * Each share's next task is a counter of its own cache line. */
typedef struct {
    int64_t next, end;
    char pad[48];
} __attribute__((aligned(64))) share;

/* Deal `count` tasks into `n` shares, one for each thread asked for; a team that comes smaller takes the shares
 * of the threads it lacks as it takes any other's. */
static void deal(share *shares, int64_t n, int64_t count) {
    for (int64_t t = 0; t < n; t++) {
        shares[t].next = count * t / n;
        shares[t].end = count * (t + 1) / n;
    }
}

/* The next task for this thread: from its own share, else from another's; -1 once every task is taken. */
static int64_t take(share *shares, int64_t n) {
    const int64_t t = omp_get_thread_num();
    for (int64_t k = 0; k < n; k++) {
        share *from = shares + (t + k) % n;
        int64_t next;
        #pragma omp atomic read
        next = from->next;
        if (next >= from->end) continue;
        #pragma omp atomic capture
        next = from->next++;
        if (next < from->end) return next;
    }
    return -1;
}

/* ---- GEMM ---------------------------------------------------------------------------------------------------- */

static inline void add_row(float *row, __m256 lo, __m256 hi) {
    _mm256_storeu_ps(row, _mm256_add_ps(_mm256_loadu_ps(row), lo));
    _mm256_storeu_ps(row + 8, _mm256_add_ps(_mm256_loadu_ps(row + 8), hi));
}

static inline void store_row(float *row, __m256 lo, __m256 hi) {
    _mm256_storeu_ps(row, lo);
    _mm256_storeu_ps(row + 8, hi);
}

/* One mr x nr tile of C: C = A @ B over kc steps, or C += A @ B when `accumulate`; then C += bias if given (the
 * bias comes last, as in MKL, so that it does not coarsen the running sums), then C = GELU(C) if `gelu`.
 * Element (i, k) of A is at Ap[k * ak + i * ai]: packed rows (ak = MR, ai = 1) or plain rows (ak = 1, ai = lda);
 * B gives NR floats a step, `ldb` apart. The registers start afresh every CHUNK steps and are added to the tile
 * in memory: shorter running sums keep the rounding error below MKL's, for ~1% of the time. */
static inline __attribute__((always_inline)) void tile(
        int64_t kc, const float *Ap, int64_t ak, int64_t ai, const float *Bp, int64_t ldb, float *C, int64_t ldc,
        int64_t mr, int64_t nr, const float *bias, int gelu, int accumulate) {
    float edge[MR * NR] __attribute__((aligned(32)));
    const int full = mr == MR && nr == NR;
    float *c = full ? C : edge; /* a partial tile goes through a full-size scratch tile */
    const int64_t ldt = full ? ldc : NR;
    if (!full && accumulate)
        for (int64_t i = 0; i < mr; i++) memcpy(edge + i * NR, C + i * ldc, nr * sizeof(float));
    for (int64_t i = 0; i < MR; i++) {
        _mm_prefetch((const char *)(c + i * ldt), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + i * ldt + 15), _MM_HINT_T0);
    }
    for (int64_t k0 = 0; k0 < kc; k0 += CHUNK) {
        const int64_t steps = kc - k0 < CHUNK ? kc - k0 : CHUNK;
        __m256 c0a, c0b, c1a, c1b, c2a, c2b, c3a, c3b, c4a, c4b, c5a, c5b;
        c0a = c0b = c1a = c1b = c2a = c2b = c3a = c3b = c4a = c4b = c5a = c5b = _mm256_setzero_ps();
        for (int64_t k = 0; k < steps; k++, Ap += ak, Bp += ldb) {
            const __m256 ba = _mm256_loadu_ps(Bp), bb = _mm256_loadu_ps(Bp + 8);
            __m256 a;
            a = _mm256_broadcast_ss(Ap);          c0a = _mm256_fmadd_ps(a, ba, c0a); c0b = _mm256_fmadd_ps(a, bb, c0b);
            a = _mm256_broadcast_ss(Ap + ai);     c1a = _mm256_fmadd_ps(a, ba, c1a); c1b = _mm256_fmadd_ps(a, bb, c1b);
            a = _mm256_broadcast_ss(Ap + 2 * ai); c2a = _mm256_fmadd_ps(a, ba, c2a); c2b = _mm256_fmadd_ps(a, bb, c2b);
            a = _mm256_broadcast_ss(Ap + 3 * ai); c3a = _mm256_fmadd_ps(a, ba, c3a); c3b = _mm256_fmadd_ps(a, bb, c3b);
            a = _mm256_broadcast_ss(Ap + 4 * ai); c4a = _mm256_fmadd_ps(a, ba, c4a); c4b = _mm256_fmadd_ps(a, bb, c4b);
            a = _mm256_broadcast_ss(Ap + 5 * ai); c5a = _mm256_fmadd_ps(a, ba, c5a); c5b = _mm256_fmadd_ps(a, bb, c5b);
        }
        /* two written-out branches, not one helper taking a flag: gcc then keeps the flag test inside the tile
         * and the GEMM loses ~8% (measured) */
        if (k0 == 0 && !accumulate) {
            store_row(c, c0a, c0b);
            store_row(c + ldt, c1a, c1b);
            store_row(c + 2 * ldt, c2a, c2b);
            store_row(c + 3 * ldt, c3a, c3b);
            store_row(c + 4 * ldt, c4a, c4b);
            store_row(c + 5 * ldt, c5a, c5b);
        } else {
            add_row(c, c0a, c0b);
            add_row(c + ldt, c1a, c1b);
            add_row(c + 2 * ldt, c2a, c2b);
            add_row(c + 3 * ldt, c3a, c3b);
            add_row(c + 4 * ldt, c4a, c4b);
            add_row(c + 5 * ldt, c5a, c5b);
        }
    }
    if (bias) {
        float b[NR] __attribute__((aligned(32))) = {0};
        memcpy(b, bias, nr * sizeof(float));
        const __m256 lo = _mm256_load_ps(b), hi = _mm256_load_ps(b + 8);
        for (int64_t i = 0; i < MR; i++) add_row(c + i * ldt, lo, hi);
    }
    if (gelu)
        for (int64_t i = 0; i < MR; i++) {
            _mm256_storeu_ps(c + i * ldt, gelu_ps(_mm256_loadu_ps(c + i * ldt)));
            _mm256_storeu_ps(c + i * ldt + 8, gelu_ps(_mm256_loadu_ps(c + i * ldt + 8)));
        }
    if (!full)
        for (int64_t i = 0; i < mr; i++) memcpy(C + i * ldc, edge + i * NR, nr * sizeof(float));
}

/* Rows `mc` of x as pack_rows lays them out (whole tiles): each K block of the packed row block is this many rows
 * of its depth. */
static inline int64_t padded_rows(int64_t mc) { return (mc + MR - 1) / MR * MR; }

/* Rows [i0, i0 + mc) x panels [j0, j1) of C, the whole K; Ap holds those rows packed, K block after K block. */
static void task(const float *Ap, int64_t i0, int64_t mc, int64_t K, const float *P, int64_t N, int64_t j0,
                 int64_t j1, const float *bias, int gelu, float *C, int64_t ldc) {
    const int64_t panels = (N + NR - 1) / NR, kb = bvl_k_block(K), tiles = (mc + MR - 1) / MR;
    for (int64_t p0 = 0; p0 < K; p0 += kb) {
        const int64_t kc = K - p0 < kb ? K - p0 : kb;
        const int last = p0 + kc == K;
        const float *Pk = P + p0 * panels * NR, *Ak = Ap + padded_rows(mc) * p0;
        for (int64_t j = j0; j < j1; j++) {
            const int64_t nr = N - j * NR < NR ? N - j * NR : NR;
            for (int64_t i = 0, t = 0; i < mc; i += MR, t++) {
                /* the next panel comes into L1 a slice per tile, ahead of its use: the hardware prefetchers
                 * stop at every 4 KiB page, and the first tile on each panel waited for L3 (5-8%, measured) */
                if (j + 1 < j1)
                    for (int64_t line = kc * t / tiles; line < kc * (t + 1) / tiles; line++)
                        _mm_prefetch((const char *)(Pk + ((j + 1) * kc + line) * NR), _MM_HINT_T0);
                tile(kc, Ak + i * kc, MR, 1, Pk + j * kc * NR, NR, C + (i0 + i) * ldc + j * NR, ldc,
                     mc - i < MR ? mc - i : MR, nr, bias && last ? bias + j * NR : NULL, gelu && last, p0 > 0);
            }
        }
    }
}

/* C[M, N] (row stride ldc) = A[M, K] (row stride lda) @ W.T (+ bias), then GELU if `gelu`; W packed by
 * bvl_pack_weight. The work is cut into tasks of MC rows x a group of panels, shared by `deal` and `take`; a
 * thread packs a block of rows once, every K block, for all the tasks it runs on it. */
int bvl_linear(const float *A, int64_t lda, int64_t M, int64_t K, const float *P, int64_t N, const float *bias,
               int gelu, float *C, int64_t ldc, int nthreads) {
    const int64_t panels = (N + NR - 1) / NR, row_blocks = (M + MC - 1) / MC, kb = bvl_k_block(K);
    const int64_t n_shares = nthreads > 0 ? nthreads : 1;
    const int64_t panel_flops = 2 * (M < MC ? M : MC) * NR * K + 1; /* one panel of a task */
    int64_t group = panels * row_blocks / (TASKS_PER_THREAD * n_shares);
    const int64_t least = (MIN_TASK_FLOPS + panel_flops - 1) / panel_flops;
    group = group < least ? least : group;
    group = group < 1 ? 1 : group > panels ? panels : group;
    const int64_t groups = (panels + group - 1) / group;
    share shares[n_shares];
    deal(shares, n_shares, row_blocks * groups);
    int failed = 0;
    #pragma omp parallel num_threads(nthreads) reduction(| : failed)
    {
        float *Ap = aligned_alloc(64, sizeof(float) * (MC + MR) * K);
        int64_t packed = -1; /* the row block Ap holds */
        failed = !Ap;
        for (int64_t n; Ap && (n = take(shares, n_shares)) >= 0;) {
            const int64_t i0 = n / groups * MC, mc = M - i0 < MC ? M - i0 : MC, j0 = n % groups * group;
            if (packed != i0) {
                for (int64_t p0 = 0; p0 < K; p0 += kb)
                    pack_rows(A + i0 * lda + p0, lda, mc, K - p0 < kb ? K - p0 : kb,
                              Ap + padded_rows(mc) * p0);
                packed = i0;
            }
            task(Ap, i0, mc, K, P, N, j0, j0 + group < panels ? j0 + group : panels, bias, gelu, C, ldc);
        }
        free(Ap);
    }
    return failed;
}

/* ---- attention ------------------------------------------------------------------------------------------- */

#define MQ 48 /* query rows per block: their scores (MQ x keys) stay in L2 */

static inline float hmax(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* What a row's seven statistics come from, before dividing by Z = sum_j e_j: sum_j e_j t_j (t_j the base-2
 * exponent, e_j = 2^t_j, t_j >= -126), and the weights on [CLS], [SEP] and punctuation keys. */
typedef struct {
    double z, zt, cls, sep, punct;
} row_sums;

/* Adds w times the seven statistics of query i's attention to acc, from its row of e_j (keys past keys_in_text are
 * not its neighbours) and its sums. The entropy is ln Z - ln 2 sum_j e_j t_j / Z: no logarithm per key. */
static void add_statistics(double *acc, double w, row_sums s, const float *row, int64_t i, int64_t keys_in_text) {
    const double weight = w / s.z;
    acc[0] += w * (log(s.z) - 0.693147180559945309 * s.zt / s.z);
    acc[1] += weight * s.cls;
    acc[2] += weight * s.sep;
    acc[3] += weight * row[i];
    acc[4] += i > 0 ? weight * row[i - 1] : 0.0;
    acc[5] += i + 1 < keys_in_text ? weight * row[i + 1] : 0.0;
    acc[6] += weight * s.punct;
}

/* row = exp(scale * row + mask - max) over n entries, in place (mask may be NULL); answers 1 / the sum, by which
 * the caller scales what it computes from the row (D numbers a row instead of n). The exponent is taken in base 2
 * with the scale folded in; without a mask the first pass only finds the largest score (a positive scale keeps
 * it largest), with one it also writes scale * row + mask back. With `kinds` (the cls, sep and punctuation rows of
 * the keys, n apart), the second pass also sums what the row's statistics need into `sums`. */
static inline __attribute__((always_inline)) float softmax_row(float *row, float scale, const float *mask, int64_t n,
                                                               const float *kinds, row_sums *sums) {
    const float log2e = 1.44269504088896341f;
    const int scaled_in_place = mask || !(scale > 0.f);
    int64_t j;
    const __m256 vscale = _mm256_set1_ps(scale);
    __m256 vmax = _mm256_set1_ps(-INFINITY);
    float tail_max = -INFINITY;
    for (j = 0; j + 8 <= n; j += 8) {
        __m256 x = _mm256_loadu_ps(row + j);
        if (scaled_in_place) {
            x = mask ? _mm256_fmadd_ps(x, vscale, _mm256_loadu_ps(mask + j)) : _mm256_mul_ps(x, vscale);
            _mm256_storeu_ps(row + j, x);
        }
        vmax = _mm256_max_ps(vmax, x);
    }
    for (; j < n; j++) {
        if (scaled_in_place) row[j] = row[j] * scale + (mask ? mask[j] : 0.f);
        tail_max = row[j] > tail_max ? row[j] : tail_max;
    }
    /* exponent c (row - max), in base 2: exactly 0 at the largest score */
    const float c = scaled_in_place ? log2e : scale * log2e, hi = fmaxf(hmax(vmax), tail_max);
    const __m256 vc = _mm256_set1_ps(c), vhi = _mm256_set1_ps(hi), lowest = _mm256_set1_ps(-126.0f);
    __m256 vsum = _mm256_setzero_ps(), zt = vsum, cls = vsum, sep = vsum, punct = vsum;
    float tail_sum = 0.f, tail_zt = 0.f, tail_cls = 0.f, tail_sep = 0.f, tail_punct = 0.f;
    for (j = 0; j + 8 <= n; j += 8) {
        const __m256 t = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(row + j), vhi), vc);
        const __m256 e = exp2_ps(t);
        _mm256_storeu_ps(row + j, e);
        vsum = _mm256_add_ps(vsum, e);
        if (kinds) {
            zt = _mm256_fmadd_ps(e, _mm256_max_ps(lowest, t), zt); /* e is 0 below -126: no 0 * -inf */
            cls = _mm256_fmadd_ps(e, _mm256_loadu_ps(kinds + j), cls);
            sep = _mm256_fmadd_ps(e, _mm256_loadu_ps(kinds + n + j), sep);
            punct = _mm256_fmadd_ps(e, _mm256_loadu_ps(kinds + 2 * n + j), punct);
        }
    }
    for (; j < n; j++) {
        const float t = (row[j] - hi) * c;
        row[j] = exp2f(t);
        tail_sum += row[j];
        if (kinds) {
            tail_zt += row[j] * (t > -126.f ? t : -126.f);
            tail_cls += row[j] * kinds[j];
            tail_sep += row[j] * kinds[n + j];
            tail_punct += row[j] * kinds[2 * n + j];
        }
    }
    const float sum = hsum(vsum) + tail_sum;
    if (kinds)
        *sums = (row_sums){sum, hsum(zt) + tail_zt, hsum(cls) + tail_cls, hsum(sep) + tail_sep,
                           hsum(punct) + tail_punct};
    return 1.0f / sum;
}

/* Asks for `rows` rows of D floats, `ld` apart, to be brought into L2. */
static void prefetch_rows(const float *x, int64_t ld, int64_t rows, int64_t D) {
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t d = 0; d < D; d += 16) _mm_prefetch((const char *)(x + r * ld + d), _MM_HINT_T1);
        _mm_prefetch((const char *)(x + r * ld + D - 1), _MM_HINT_T1); /* a row that straddles one line more */
    }
}

/* Keys k[:S] (rows `ldk` apart) as 16-key panels D deep, for block_scores. */
static void pack_keys(const float *k, int64_t ldk, int64_t S, int64_t D, float *packed_k) {
    for (int64_t j = 0; j < (S + NR - 1) / NR; j++) pack_panel(k, ldk, S, D, D, j, packed_k);
}

/* scores[i, :S] (rows `width` apart) = q[i] . k[:S] for `rows` <= MQ query rows `ldq` apart, the keys packed by
 * pack_keys. q's rows are read in place; a last partial tile of rows is copied to packed_q first (a tile reads MR
 * rows). */
static void block_scores(const float *q, int64_t ldq, int64_t rows, int64_t D, const float *packed_k, int64_t S,
                         float *scores, int64_t width, float *packed_q) {
    const int64_t full_rows = rows / MR * MR;
    if (full_rows < rows) pack_rows(q + full_rows * ldq, ldq, rows - full_rows, D, packed_q);
    for (int64_t j = 0; j < (S + NR - 1) / NR; j++) {
        const int64_t nr = S - j * NR < NR ? S - j * NR : NR;
        for (int64_t i = 0; i < full_rows; i += MR)
            tile(D, q + i * ldq, 1, ldq, packed_k + j * D * NR, NR, scores + i * width + j * NR, width, MR, nr, NULL,
                 0, 0);
        if (full_rows < rows)
            tile(D, packed_q, MR, 1, packed_k + j * D * NR, NR, scores + full_rows * width + j * NR, width,
                 rows - full_rows, nr, NULL, 0, 0);
    }
}

#define STATISTICS 7 /* entropy, weight on [CLS], on [SEP], on itself, on the previous and next key, on punctuation */

/* The names of the statistics add_statistics writes, in its order, comma-separated: build.py compares them with
 * bertviz_lab/kernels/head_statistics.py when it loads the library, so the two cannot drift apart unnoticed. */
const char *bvl_statistics_names(void) { return "entropy,cls,sep,self,prev,next,punct"; }

/* out[b, t, h, :] = softmax(scale * q[b, h, t] . k[b, h, :] + mask[b, h, t, :]) @ v[b, h, :, :], for every batch
 * row b, head h and query t: BERT's attention without dropout. q, k, v and mask are given by strides (in
 * elements; their last dimension is contiguous, a broadcast dimension has stride 0, mask may be NULL); out is
 * contiguous (B, T, H, D). D must be a multiple of NR. Threads share the (b, h, query block) tasks.
 * With `probs` (contiguous (B, H, T, S)), the probabilities themselves are written there too, for hooks to see;
 * `out` may then be NULL (v is not read), for a caller that lets hooks change them before multiplying by v itself.
 * With `stats` ((B, H, query blocks, 7), T = S), the seven statistics of each block's probabilities are summed there
 * over its queries, each weighted by valid[b, t] (contiguous (B, T)); kinds is contiguous (B, 3, S). */
int bvl_attention(const float *q, const int64_t *q_strides, const float *k, const int64_t *k_strides,
                  const float *v, const int64_t *v_strides, const float *mask, const int64_t *mask_strides,
                  int64_t B, int64_t H, int64_t T, int64_t S, int64_t D, float scale, float *out, float *probs,
                  const float *valid, const float *kinds, double *stats, int nthreads) {
    const int64_t key_panels = (S + NR - 1) / NR, width = key_panels * NR, blocks = (T + MQ - 1) / MQ;
    const int64_t kb = bvl_k_block(S);
    const int64_t n_shares = nthreads > 0 ? nthreads : 1;
    share shares[n_shares];
    deal(shares, n_shares, B * H * blocks);
    int failed = 0;
    #pragma omp parallel num_threads(nthreads) reduction(| : failed)
    {
        float *scores = aligned_alloc(64, sizeof(float) * MQ * width);
        float *packed_k = aligned_alloc(64, sizeof(float) * width * D);
        float *packed_v = aligned_alloc(64, sizeof(float) * S * D);
        float *packed_q = aligned_alloc(64, sizeof(float) * MR * D);
        int64_t packed_for = -1; /* the (b, h) whose keys packed_k holds */
        const int ready = scores && packed_k && packed_v && packed_q;
        if (ready) memset(scores, 0, sizeof(float) * MQ * width); /* a last partial tile reads rows past the block */
        failed = !ready;
        for (int64_t task; ready && (task = take(shares, n_shares)) >= 0;) {
            const int64_t bh = task / blocks, b = bh / H, h = bh % H, t0 = task % blocks * MQ;
            const int64_t rows = T - t0 < MQ ? T - t0 : MQ;
            const float *kh = k + b * k_strides[0] + h * k_strides[1];
            const float *vh = out ? v + b * v_strides[0] + h * v_strides[1] : NULL;
            if (packed_for != bh) { /* keys as 16-key panels D deep; values as 16-dimension panels S deep */
                pack_keys(kh, k_strides[2], S, D, packed_k);
                for (int64_t key = 0; key < S && out; key++)
                    for (int64_t j = 0; j < D / NR; j++)
                        memcpy(packed_v + (j * S + key) * NR, vh + key * v_strides[2] + j * NR,
                               NR * sizeof(float));
                packed_for = bh;
                if (bh + 1 < B * H) { /* the next head's rows, a stride apart: no hardware prefetcher follows */
                    const int64_t nb = (bh + 1) / H, nh = (bh + 1) % H;
                    prefetch_rows(q + nb * q_strides[0] + nh * q_strides[1], q_strides[2], T, D);
                    prefetch_rows(k + nb * k_strides[0] + nh * k_strides[1], k_strides[2], S, D);
                    if (out) prefetch_rows(v + nb * v_strides[0] + nh * v_strides[1], v_strides[2], S, D);
                }
            }
            block_scores(q + b * q_strides[0] + h * q_strides[1] + t0 * q_strides[2], q_strides[2], rows, D,
                         packed_k, S, scores, width, packed_q);
            float inverse_sums[MQ];
            row_sums sums;
            double *acc = stats ? stats + task * STATISTICS : NULL;
            if (acc) memset(acc, 0, sizeof(double) * STATISTICS);
            for (int64_t i = 0; i < rows; i++) {
                float *row = scores + i * width;
                const float *row_mask = mask ? mask + b * mask_strides[0] + h * mask_strides[1] +
                                                   (t0 + i) * mask_strides[2] : NULL;
                const float w = acc ? valid[b * T + t0 + i] : 0.f;
                if (w == 0.f) {
                    inverse_sums[i] = softmax_row(row, scale, row_mask, S, NULL, NULL);
                    continue;
                }
                inverse_sums[i] = softmax_row(row, scale, row_mask, S, kinds + b * 3 * S, &sums);
                add_statistics(acc, w, sums, row, t0 + i, S);
            }
            if (probs) {
                for (int64_t i = 0; i < rows; i++) {
                    const float *row = scores + i * width;
                    float *dst = probs + ((b * H + h) * T + t0 + i) * S;
                    const __m256 inverse = _mm256_set1_ps(inverse_sums[i]);
                    int64_t j = 0;
                    for (; j + 8 <= S; j += 8)
                        _mm256_storeu_ps(dst + j, _mm256_mul_ps(_mm256_loadu_ps(row + j), inverse));
                    for (; j < S; j++) dst[j] = row[j] * inverse_sums[i];
                }
            }
            if (!out) continue;
            /* out = probs @ v, K-blocked over the keys */
            float *o = out + ((b * T + t0) * H + h) * D;
            for (int64_t p0 = 0; p0 < S; p0 += kb) {
                const int64_t kc = S - p0 < kb ? S - p0 : kb;
                for (int64_t j = 0; j < D / NR; j++)
                    for (int64_t i = 0; i < rows; i += MR)
                        tile(kc, scores + i * width + p0, 1, width, packed_v + j * S * NR + p0 * NR, NR,
                             o + i * H * D + j * NR, H * D, rows - i < MR ? rows - i : MR, NR, NULL, 0, p0 > 0);
            }
            for (int64_t i = 0; i < rows; i++) {
                const __m256 inverse = _mm256_set1_ps(inverse_sums[i]);
                for (int64_t d = 0; d < D; d += 8)
                    _mm256_storeu_ps(o + i * H * D + d, _mm256_mul_ps(_mm256_loadu_ps(o + i * H * D + d), inverse));
            }
        }
        free(scores);
        free(packed_k);
        free(packed_v);
        free(packed_q);
    }
    return failed;
}

/* ---- attention statistics ------------------------------------------------------------------------------------ */


/* Adds w times the seven statistics of query i's attention to acc, from its raw scores q[i] . k[j] (`row`): the
 * softmax of scale * row over the keys where keys[0] (valid) is not 0, never written out. keys holds valid, cls,
 * sep and punctuation rows `width` apart, 0 past the text; `n` rounds up the keys to a multiple of 8 within width.
 * Keys that are not valid are not read (stale scores there do not matter); a NaN among the others makes every
 * statistic of the row NaN, as in PyTorch's softmax. */
static void row_statistics(float *row, float scale, const float *keys, int64_t width, int64_t n, int64_t i,
                           int64_t keys_in_text, double w, double *acc) {
    const __m256 vscale = _mm256_set1_ps(scale), zero = _mm256_setzero_ps(), lowest = _mm256_set1_ps(-126.0f);
    __m256 vmax = _mm256_set1_ps(-INFINITY);
    for (int64_t j = 0; j < n; j += 8) {
        const __m256 valid = _mm256_cmp_ps(_mm256_load_ps(keys + j), zero, _CMP_NEQ_UQ);
        const __m256 x = _mm256_mul_ps(_mm256_loadu_ps(row + j), vscale);
        vmax = _mm256_max_ps(vmax, _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), x, valid));
    }
    /* t = (scale * row - max) log2 e, in [-126, 0] (NaN stays NaN), and e = 2^t: base 2, as softmax_row */
    const float log2e = 1.44269504088896341f;
    const __m256 c = _mm256_set1_ps(scale * log2e), offset = _mm256_set1_ps(hmax(vmax) * log2e);
    __m256 z = zero, zt = zero, cls = zero, sep = zero, punct = zero;
    for (int64_t j = 0; j < n; j += 8) {
        const __m256 valid = _mm256_cmp_ps(_mm256_load_ps(keys + j), zero, _CMP_NEQ_UQ);
        const __m256 x = _mm256_and_ps(valid, _mm256_loadu_ps(row + j));
        const __m256 t = _mm256_max_ps(lowest, _mm256_min_ps(zero, _mm256_fmsub_ps(x, c, offset)));
        const __m256 e = _mm256_and_ps(valid, exp2_ps(t));
        _mm256_storeu_ps(row + j, e);
        z = _mm256_add_ps(z, e);
        zt = _mm256_fmadd_ps(e, t, zt);
        cls = _mm256_fmadd_ps(e, _mm256_load_ps(keys + width + j), cls);
        sep = _mm256_fmadd_ps(e, _mm256_load_ps(keys + 2 * width + j), sep);
        punct = _mm256_fmadd_ps(e, _mm256_load_ps(keys + 3 * width + j), punct);
    }
    add_statistics(acc, w, (row_sums){hsum(z), hsum(zt), hsum(cls), hsum(sep), hsum(punct)}, row, i, keys_in_text);
}

/* out[b, h, :] = the seven statistics of softmax(scale * q[b, h] k[b, h]^T) summed over the queries i of text b,
 * each weighted by valid[b, i], keys where valid[b, :] is 0 masked out (BERT's padding mask): what the corpus keeps
 * of an attention map, without forming the map. q and k are (B, H, S, D) given by strides (last dimension
 * contiguous); valid is contiguous (B, S), kinds contiguous (B, 3, S) (which keys are [CLS], [SEP], punctuation).
 * Queries and keys past a text's last valid one are not computed. Threads share the (b, h) tasks. */
int bvl_attention_statistics(const float *q, const int64_t *q_strides, const float *k, const int64_t *k_strides,
                             const float *valid, const float *kinds, int64_t B, int64_t H, int64_t S, int64_t D,
                             float scale, double *out, int nthreads) {
    const int64_t width = (S + NR - 1) / NR * NR;
    const int64_t n_shares = nthreads > 0 ? nthreads : 1;
    share shares[n_shares];
    deal(shares, n_shares, B * H);
    int failed = 0;
    #pragma omp parallel num_threads(nthreads) reduction(| : failed)
    {
        float *scores = aligned_alloc(64, sizeof(float) * MQ * width);
        float *packed_k = aligned_alloc(64, sizeof(float) * width * D);
        float *packed_q = aligned_alloc(64, sizeof(float) * MR * D);
        float *keys = aligned_alloc(64, sizeof(float) * 4 * width); /* valid, cls, sep, punct rows of text b */
        int64_t keys_for = -1, n = 0; /* the text whose rows `keys` holds, and its keys up to the last valid one */
        const int ready = scores && packed_k && packed_q && keys;
        if (ready) memset(scores, 0, sizeof(float) * MQ * width);
        failed = !ready;
        for (int64_t task; ready && (task = take(shares, n_shares)) >= 0;) {
            const int64_t b = task / H, h = task % H;
            double *acc = out + task * STATISTICS;
            if (keys_for != b) {
                const float *vb = valid + b * S;
                for (n = S; n > 0 && vb[n - 1] == 0.f; n--) {}
                memset(keys, 0, sizeof(float) * 4 * width);
                memcpy(keys, vb, n * sizeof(float));
                for (int64_t kind = 0; kind < 3; kind++)
                    memcpy(keys + (kind + 1) * width, kinds + (b * 3 + kind) * S, n * sizeof(float));
                keys_for = b;
            }
            memset(acc, 0, sizeof(double) * STATISTICS);
            if (n == 0) continue;
            pack_keys(k + b * k_strides[0] + h * k_strides[1], k_strides[2], n, D, packed_k);
            const float *qh = q + b * q_strides[0] + h * q_strides[1];
            for (int64_t t0 = 0; t0 < n; t0 += MQ) {
                const int64_t rows = n - t0 < MQ ? n - t0 : MQ;
                block_scores(qh + t0 * q_strides[2], q_strides[2], rows, D, packed_k, n, scores, width, packed_q);
                for (int64_t i = 0; i < rows; i++)
                    if (keys[t0 + i] != 0.f)
                        row_statistics(scores + i * width, scale, keys, width, (n + 7) / 8 * 8, t0 + i, n,
                                       keys[t0 + i], acc);
            }
        }
        free(scores);
        free(packed_k);
        free(packed_q);
        free(keys);
    }
    return failed;
}
