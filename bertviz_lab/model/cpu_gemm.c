/* fp32 `y = x @ W.T + b` for x86 CPUs with AVX2 and FMA, on a weight packed once into panels.
 *
 * The classic blocked GEMM: a 6 x 16 tile of y lives in twelve AVX registers while the kernel walks a block of K;
 * the weight is packed ahead of time into 16-column panels, K-block by K-block (each panel read from L1), and
 * each thread packs 6-row slices of its x block (read from L2). Threads share the work by weight panels (by rows
 * when there are too few panels) inside the OpenMP runtime that PyTorch itself uses.
 * Built and loaded by cpu_gemm.py; every size is in floats, every stride in elements.
 */
#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <omp.h>

#define MR 6       /* rows of a register tile */
#define NR 16      /* columns of a register tile: two AVX registers */
#define KC_MAX 384 /* deepest K block: a 16-column panel of it is 24 KiB, within L1 */
#define MC 144     /* rows of x packed at a time: 144 x 384 floats is 216 KiB, within L2 */
#define CHUNK 128  /* steps summed in registers before they are added to the tile */

int64_t bvl_abi_version(void) { return 1; }

/* Depth of each K block: K split into equal blocks no deeper than KC_MAX. */
int64_t bvl_k_block(int64_t K) {
    int64_t blocks = (K + KC_MAX - 1) / KC_MAX;
    return (K + blocks - 1) / blocks;
}

int64_t bvl_packed_floats(int64_t N, int64_t K) { return (N + NR - 1) / NR * NR * K; }

/* Layout: for each K block p0, for each panel j, kc rows of NR floats (columns past N are zero). */
void bvl_pack_weight(const float *W, int64_t ldw, int64_t N, int64_t K, float *P, int nthreads) {
    const int64_t panels = (N + NR - 1) / NR, kb = bvl_k_block(K);
    #pragma omp parallel for num_threads(nthreads) schedule(static)
    for (int64_t j = 0; j < panels; j++) {
        for (int64_t p0 = 0; p0 < K; p0 += kb) {
            const int64_t kc = K - p0 < kb ? K - p0 : kb;
            float *dst = P + p0 * panels * NR + j * kc * NR;
            for (int64_t r = 0; r < NR; r++) {
                const int64_t n = j * NR + r;
                for (int64_t k = 0; k < kc; k++) dst[k * NR + r] = n < N ? W[n * ldw + p0 + k] : 0.f;
            }
        }
    }
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

static inline void add_row(float *row, __m256 lo, __m256 hi) {
    _mm256_storeu_ps(row, _mm256_add_ps(_mm256_loadu_ps(row), lo));
    _mm256_storeu_ps(row + 8, _mm256_add_ps(_mm256_loadu_ps(row + 8), hi));
}

/* Add x @ W.T over kc steps to one mr x nr tile of C, first setting the tile to the bias (or zero) unless
 * `accumulate`. The registers start from zero every CHUNK steps and are added to the tile in memory: shorter
 * running sums keep the rounding error below MKL's, for ~1% of the time. */
static void tile(int64_t kc, const float *Ap, const float *Bp, float *C, int64_t ldc, int64_t mr, int64_t nr,
                 const float *bias, int accumulate) {
    float edge[MR * NR] __attribute__((aligned(32)));
    const int full = mr == MR && nr == NR;
    float *c = full ? C : edge; /* a partial tile goes through a full-size scratch tile */
    const int64_t ldt = full ? ldc : NR;
    if (!full) {
        memset(edge, 0, sizeof edge);
        if (accumulate)
            for (int64_t i = 0; i < mr; i++) memcpy(edge + i * NR, C + i * ldc, nr * sizeof(float));
    }
    for (int64_t i = 0; i < MR; i++) {
        _mm_prefetch((const char *)(c + i * ldt), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + i * ldt + 15), _MM_HINT_T0);
    }
    if (!accumulate) {
        float b[NR] __attribute__((aligned(32))) = {0};
        if (bias) memcpy(b, bias, nr * sizeof(float));
        for (int64_t i = 0; i < MR; i++) {
            _mm256_storeu_ps(c + i * ldt, _mm256_load_ps(b));
            _mm256_storeu_ps(c + i * ldt + 8, _mm256_load_ps(b + 8));
        }
    }
    for (int64_t k0 = 0; k0 < kc; k0 += CHUNK) {
        const int64_t steps = kc - k0 < CHUNK ? kc - k0 : CHUNK;
        __m256 c0a, c0b, c1a, c1b, c2a, c2b, c3a, c3b, c4a, c4b, c5a, c5b;
        c0a = c0b = c1a = c1b = c2a = c2b = c3a = c3b = c4a = c4b = c5a = c5b = _mm256_setzero_ps();
        for (int64_t k = 0; k < steps; k++, Ap += MR, Bp += NR) {
            const __m256 ba = _mm256_loadu_ps(Bp), bb = _mm256_loadu_ps(Bp + 8);
            __m256 a;
            a = _mm256_broadcast_ss(Ap);     c0a = _mm256_fmadd_ps(a, ba, c0a); c0b = _mm256_fmadd_ps(a, bb, c0b);
            a = _mm256_broadcast_ss(Ap + 1); c1a = _mm256_fmadd_ps(a, ba, c1a); c1b = _mm256_fmadd_ps(a, bb, c1b);
            a = _mm256_broadcast_ss(Ap + 2); c2a = _mm256_fmadd_ps(a, ba, c2a); c2b = _mm256_fmadd_ps(a, bb, c2b);
            a = _mm256_broadcast_ss(Ap + 3); c3a = _mm256_fmadd_ps(a, ba, c3a); c3b = _mm256_fmadd_ps(a, bb, c3b);
            a = _mm256_broadcast_ss(Ap + 4); c4a = _mm256_fmadd_ps(a, ba, c4a); c4b = _mm256_fmadd_ps(a, bb, c4b);
            a = _mm256_broadcast_ss(Ap + 5); c5a = _mm256_fmadd_ps(a, ba, c5a); c5b = _mm256_fmadd_ps(a, bb, c5b);
        }
        add_row(c, c0a, c0b);
        add_row(c + ldt, c1a, c1b);
        add_row(c + 2 * ldt, c2a, c2b);
        add_row(c + 3 * ldt, c3a, c3b);
        add_row(c + 4 * ldt, c4a, c4b);
        add_row(c + 5 * ldt, c5a, c5b);
    }
    if (!full)
        for (int64_t i = 0; i < mr; i++) memcpy(C + i * ldc, edge + i * NR, nr * sizeof(float));
}

/* Rows [m0, m1) x panels [j0, j1) of C, the whole K; Ap is this thread's MC x KC scratch. */
static void block(const float *A, int64_t lda, int64_t m0, int64_t m1, int64_t K, const float *P, int64_t N,
                  int64_t j0, int64_t j1, const float *bias, float *C, int64_t ldc, float *Ap) {
    const int64_t panels = (N + NR - 1) / NR, kb = bvl_k_block(K);
    for (int64_t p0 = 0; p0 < K; p0 += kb) {
        const int64_t kc = K - p0 < kb ? K - p0 : kb;
        const float *Pk = P + p0 * panels * NR;
        for (int64_t i0 = m0; i0 < m1; i0 += MC) {
            const int64_t mc = m1 - i0 < MC ? m1 - i0 : MC;
            pack_rows(A + i0 * lda + p0, lda, mc, kc, Ap);
            for (int64_t j = j0; j < j1; j++) {
                const int64_t nr = N - j * NR < NR ? N - j * NR : NR;
                for (int64_t i = 0; i < mc; i += MR)
                    tile(kc, Ap + i * kc, Pk + j * kc * NR, C + (i0 + i) * ldc + j * NR, ldc,
                         mc - i < MR ? mc - i : MR, nr, bias ? bias + j * NR : NULL, p0 > 0);
            }
        }
    }
}

/* C[M, N] (row stride ldc) = A[M, K] (row stride lda) @ W.T (+ bias), W packed by bvl_pack_weight. */
int bvl_linear(const float *A, int64_t lda, int64_t M, int64_t K, const float *P, int64_t N, const float *bias,
               float *C, int64_t ldc, int nthreads) {
    const int64_t panels = (N + NR - 1) / NR;
    int failed = 0;
    #pragma omp parallel num_threads(nthreads) reduction(| : failed)
    {
        const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
        float *Ap = aligned_alloc(64, sizeof(float) * (MC + MR) * KC_MAX);
        if (!Ap) {
            failed = 1;
        } else if (panels >= 2 * nt) { /* each thread its share of the panels, all rows */
            block(A, lda, 0, M, K, P, N, panels * t / nt, panels * (t + 1) / nt, bias, C, ldc, Ap);
        } else { /* few panels: each thread its share of the rows, all panels */
            const int64_t m0 = M * t / nt, m1 = M * (t + 1) / nt;
            if (m1 > m0) block(A, lda, m0, m1, K, P, N, 0, panels, bias, C, ldc, Ap);
        }
        free(Ap);
    }
    return failed;
}
