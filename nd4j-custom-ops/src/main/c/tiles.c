/*
 * The element-wise work on float32 score tiles of the flash kernel (org.attn4j.ops.flash.NativeTileMath), in
 * AVX-512: the online-softmax step of the forward pass, the two row-shifted steps of the backward pass and the
 * accumulator's row scaling, and the tile products. The same operations as the Java tile math (VectorTileMath),
 * with the same results up to float32 rounding; the softmax step takes well under half the Java version's time here
 * (0.17-0.20 against 0.50 ns a score of a 512 x 512 tile: one pass for a row that keeps its shift, no bounds
 * checks, no mask tests per vector, masked tails).
 *
 * Every function takes the tile as an address of rows x cols floats, row-major. Row values (shifts, maxima,
 * factors) are Java double arrays, read and written inside critical regions (no JNI call, no allocation).
 * The code only runs on a CPU with AVX-512F: supported() says so, and the Java side never calls the rest
 * otherwise.
 */
#include <jni.h>
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define AVX512 __attribute__((target("avx512f")))

/* How far (base 2) a score may exceed the row's shift before the shift moves: powers up to 2^8. */
#define LAZY 8.0f

/* 2^x: x = n + f with n the nearest integer, a degree-6 polynomial for 2^f on [-0.5, 0.5] (relative error below
 * 1e-7) times 2^n by VSCALEFPS. Below -125.5 it gives exactly 0 (so -inf gives 0) through the instruction's zero
 * mask: results there would be subnormal, and producing one costs a microcode assist (an expShifted over a 256 x 512
 * tile half of -inf took 7 times as long when they were computed). From 128 on it is +inf; NaN stays NaN (MAXPS and
 * MINPS return their second operand when one is NaN, and the mask keeps unordered lanes). */
AVX512 static inline __m512 exp2v(__m512 x) {
    x = _mm512_max_ps(_mm512_set1_ps(-127.0f), x);
    x = _mm512_min_ps(_mm512_set1_ps(128.0f), x);   /* 2^128 = +inf */
    __mmask16 normal = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-125.5f), _CMP_NLT_UQ);
    __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 f = _mm512_sub_ps(x, n);
    __m512 p = _mm512_set1_ps(1.535336188319500e-4f);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.339887440266574e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.618437357674640e-3f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.550332471162809e-2f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.402264791363012e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.931472028550421e-1f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_maskz_scalef_ps(normal, p, n);
}

/* The lanes of the last, partial vector of a row of cols floats (all 16 when cols is a multiple of 16). */
static inline __mmask16 tail(int cols) {
    int rest = cols & 15;
    return rest == 0 ? (__mmask16) 0xFFFF : (__mmask16) ((1u << rest) - 1u);
}

AVX512 static float row_max(const float *row, int cols) {
    __m512 m1 = _mm512_set1_ps(-INFINITY);
    __m512 m2 = m1;
    int full = cols & ~15;
    int c = 0;
    for (; c + 32 <= full; c += 32) {
        m1 = _mm512_max_ps(m1, _mm512_loadu_ps(row + c));
        m2 = _mm512_max_ps(m2, _mm512_loadu_ps(row + c + 16));
    }
    for (; c < full; c += 16) {
        m1 = _mm512_max_ps(m1, _mm512_loadu_ps(row + c));
    }
    if (c < cols) {
        m1 = _mm512_max_ps(m1, _mm512_mask_loadu_ps(_mm512_set1_ps(-INFINITY), tail(cols), row + c));
    }
    return _mm512_reduce_max_ps(_mm512_max_ps(m1, m2));
}

/* row[c] = 2^((row[c] + add) * mul); returns the row's sum. Two vectors a step: two exp2 chains in flight. */
AVX512 static double exp2_row(float *row, int cols, float add, float mul) {
    __m512 a = _mm512_set1_ps(add);
    __m512 k = _mm512_set1_ps(mul);
    __m512 s1 = _mm512_setzero_ps();
    __m512 s2 = s1;
    int full = cols & ~15;
    int c = 0;
    for (; c + 32 <= full; c += 32) {
        __m512 p = exp2v(_mm512_mul_ps(_mm512_add_ps(_mm512_loadu_ps(row + c), a), k));
        __m512 q = exp2v(_mm512_mul_ps(_mm512_add_ps(_mm512_loadu_ps(row + c + 16), a), k));
        _mm512_storeu_ps(row + c, p);
        _mm512_storeu_ps(row + c + 16, q);
        s1 = _mm512_add_ps(s1, p);
        s2 = _mm512_add_ps(s2, q);
    }
    for (; c < full; c += 16) {
        __m512 p = exp2v(_mm512_mul_ps(_mm512_add_ps(_mm512_loadu_ps(row + c), a), k));
        _mm512_storeu_ps(row + c, p);
        s1 = _mm512_add_ps(s1, p);
    }
    if (c < cols) {
        __mmask16 t = tail(cols);
        __m512 p = exp2v(_mm512_mul_ps(_mm512_add_ps(_mm512_maskz_loadu_ps(t, row + c), a), k));
        _mm512_mask_storeu_ps(row + c, t, p);
        s1 = _mm512_add_ps(s1, _mm512_maskz_mov_ps(t, p));
    }
    return (double) _mm512_reduce_add_ps(_mm512_add_ps(s1, s2));
}

AVX512 static void scale_row(float *row, int cols, float f) {
    __m512 k = _mm512_set1_ps(f);
    int full = cols & ~15;
    int c = 0;
    for (; c < full; c += 16) {
        _mm512_storeu_ps(row + c, _mm512_mul_ps(_mm512_loadu_ps(row + c), k));
    }
    if (c < cols) {
        __mmask16 t = tail(cols);
        _mm512_mask_storeu_ps(row + c, t, _mm512_mul_ps(_mm512_maskz_loadu_ps(t, row + c), k));
    }
}

/*
 * A row that keeps its shift: row[c] = 2^(row[c] - shift) in one pass, while no score exceeds limit. Returns the
 * number of columns done: cols, with their sum in *sum, or the start of the first block of 64 (or the row's last,
 * shorter block) holding a score above limit, with the columns before it done and their sum in *sum. The powers
 * done are at most 2^LAZY, so a caller that then moves the shift can rescale them.
 */
AVX512 static int exp2_row_kept(float *row, int cols, float shift, float limit, double *sum) {
    __m512 a = _mm512_set1_ps(-shift);
    __m512 lim = _mm512_set1_ps(limit);
    __m512 s1 = _mm512_setzero_ps();
    __m512 s2 = s1;
    int c = 0;
    for (; c + 64 <= cols; c += 64) {
        __m512 v0 = _mm512_loadu_ps(row + c);
        __m512 v1 = _mm512_loadu_ps(row + c + 16);
        __m512 v2 = _mm512_loadu_ps(row + c + 32);
        __m512 v3 = _mm512_loadu_ps(row + c + 48);
        __m512 mx = _mm512_max_ps(_mm512_max_ps(v0, v1), _mm512_max_ps(v2, v3));
        if (_mm512_cmp_ps_mask(mx, lim, _CMP_GT_OQ) != 0) {
            *sum = (double) _mm512_reduce_add_ps(_mm512_add_ps(s1, s2));
            return c;
        }
        __m512 p0 = exp2v(_mm512_add_ps(v0, a));
        __m512 p1 = exp2v(_mm512_add_ps(v1, a));
        __m512 p2 = exp2v(_mm512_add_ps(v2, a));
        __m512 p3 = exp2v(_mm512_add_ps(v3, a));
        _mm512_storeu_ps(row + c, p0);
        _mm512_storeu_ps(row + c + 16, p1);
        _mm512_storeu_ps(row + c + 32, p2);
        _mm512_storeu_ps(row + c + 48, p3);
        s1 = _mm512_add_ps(s1, _mm512_add_ps(p0, p1));
        s2 = _mm512_add_ps(s2, _mm512_add_ps(p2, p3));
    }
    if (c < cols) {
        if (row_max(row + c, cols - c) > limit) {
            *sum = (double) _mm512_reduce_add_ps(_mm512_add_ps(s1, s2));
            return c;
        }
        *sum = (double) _mm512_reduce_add_ps(_mm512_add_ps(s1, s2)) + exp2_row(row + c, cols - c, -shift, 1.0f);
        return cols;
    }
    *sum = (double) _mm512_reduce_add_ps(_mm512_add_ps(s1, s2));
    return cols;
}

/*
 * Base 2. A row keeps its shift (the running maximum m) while no score exceeds it by more than LAZY: softmax does
 * not depend on the shift, which only has to keep the powers finite, and a kept shift needs no rescaling of the
 * accumulator (alpha = 1). Such a row is exponentiated in one pass (exp2_row_kept); the first tile of a row, and
 * the rest of a row once a score passes the limit, take the row's maximum first. A row that has seen no key keeps
 * m = -inf and is shifted by 0, so that 2^-inf gives 0, not NaN.
 */
AVX512 static jboolean softmax_step(float *tile, int rows, int cols, double *m, double *alpha, double *sum) {
    jboolean rescale = JNI_FALSE;
    for (int r = 0; r < rows; r++) {
        float *row = tile + (size_t) r * cols;
        double old = m[r];
        double done = 0.0;
        int from = 0;
        if (old != -INFINITY) {
            from = exp2_row_kept(row, cols, (float) old, (float) old + LAZY, &done);
        }
        if (from == cols) {
            alpha[r] = 1.0;
            sum[r] = done;
        } else {
            double max = row_max(row + from, cols - from);
            double now = old;
            if (old == -INFINITY || max > (double) ((float) old + LAZY)) {
                now = max > old ? max : old;
            }
            alpha[r] = now == old ? 1.0 : exp2(old - now);
            m[r] = now;
            rescale |= alpha[r] != 1.0;
            float shift = now == -INFINITY ? 0.0f : (float) now;
            if (from > 0) {
                /* the columns done with the old shift: powers up to 2^LAZY, moved to the new one */
                scale_row(row, from, (float) alpha[r]);
                done *= alpha[r];
            }
            sum[r] = done + exp2_row(row + from, cols - from, -shift, 1.0f);
        }
        if (isnan(sum[r])) {
            /* A NaN score (MAXPS may have passed over it in the row maximum): the row's m and alpha become NaN,
             * and so are its powers, so that every later step and the output stay NaN, never a finite number. */
            scale_row(row, cols, NAN);
            m[r] = NAN;
            alpha[r] = NAN;
            rescale = JNI_TRUE;
        }
    }
    return rescale;
}

JNIEXPORT jboolean JNICALL Java_org_attn4j_ops_flash_NativeTileMath_supported(JNIEnv *env, jclass cls) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") ? JNI_TRUE : JNI_FALSE;
}

JNIEXPORT jboolean JNICALL Java_org_attn4j_ops_flash_NativeTileMath_softmaxStep(
        JNIEnv *env, jclass cls, jlong tile, jint rows, jint cols, jdoubleArray mArray, jdoubleArray alphaArray,
        jdoubleArray sumArray) {
    double *m = (*env)->GetPrimitiveArrayCritical(env, mArray, NULL);
    double *alpha = m == NULL ? NULL : (*env)->GetPrimitiveArrayCritical(env, alphaArray, NULL);
    double *sum = alpha == NULL ? NULL : (*env)->GetPrimitiveArrayCritical(env, sumArray, NULL);
    jboolean rescale = JNI_FALSE;
    if (sum != NULL) {      /* NULL: out of memory, an OutOfMemoryError is pending for the caller */
        rescale = softmax_step((float *) (intptr_t) tile, rows, cols, m, alpha, sum);
        (*env)->ReleasePrimitiveArrayCritical(env, sumArray, sum, 0);
    }
    if (alpha != NULL) {
        (*env)->ReleasePrimitiveArrayCritical(env, alphaArray, alpha, 0);
    }
    if (m != NULL) {
        (*env)->ReleasePrimitiveArrayCritical(env, mArray, m, 0);
    }
    return rescale;
}

/* p[r][c] = e^(p[r][c] + shift[r]), as 2^((p + shift) log2 e). */
AVX512 static void exp_shifted(float *p, const double *shift, int rows, int cols) {
    const float log2e = (float) (1.0 / log(2.0));
    for (int r = 0; r < rows; r++) {
        exp2_row(p + (size_t) r * cols, cols, (float) shift[r], log2e);
    }
}

JNIEXPORT void JNICALL Java_org_attn4j_ops_flash_NativeTileMath_expShifted(
        JNIEnv *env, jclass cls, jlong p, jdoubleArray shiftArray, jint rows, jint cols) {
    double *shift = (*env)->GetPrimitiveArrayCritical(env, shiftArray, NULL);
    if (shift == NULL) {
        return;
    }
    exp_shifted((float *) (intptr_t) p, shift, rows, cols);
    (*env)->ReleasePrimitiveArrayCritical(env, shiftArray, shift, JNI_ABORT);
}

/* dp[r][c] = p[r][c] (dp[r][c] + shift[r]). */
AVX512 static void shifted_product(float *dp, const float *p, const double *shift, int rows, int cols) {
    int full = cols & ~15;
    __mmask16 t = tail(cols);
    for (int r = 0; r < rows; r++) {
        float *d = dp + (size_t) r * cols;
        const float *q = p + (size_t) r * cols;
        __m512 s = _mm512_set1_ps((float) shift[r]);
        int c = 0;
        for (; c < full; c += 16) {
            _mm512_storeu_ps(d + c, _mm512_mul_ps(_mm512_add_ps(_mm512_loadu_ps(d + c), s), _mm512_loadu_ps(q + c)));
        }
        if (c < cols) {
            __m512 v = _mm512_mul_ps(_mm512_add_ps(_mm512_maskz_loadu_ps(t, d + c), s), _mm512_maskz_loadu_ps(t, q + c));
            _mm512_mask_storeu_ps(d + c, t, v);
        }
    }
}

JNIEXPORT void JNICALL Java_org_attn4j_ops_flash_NativeTileMath_shiftedProduct(
        JNIEnv *env, jclass cls, jlong dp, jlong p, jdoubleArray shiftArray, jint rows, jint cols) {
    double *shift = (*env)->GetPrimitiveArrayCritical(env, shiftArray, NULL);
    if (shift == NULL) {
        return;
    }
    shifted_product((float *) (intptr_t) dp, (const float *) (intptr_t) p, shift, rows, cols);
    (*env)->ReleasePrimitiveArrayCritical(env, shiftArray, shift, JNI_ABORT);
}

AVX512 static void scale_rows(float *m, const double *factors, int rows, int cols) {
    for (int r = 0; r < rows; r++) {
        scale_row(m + (size_t) r * cols, cols, (float) factors[r]);
    }
}

JNIEXPORT void JNICALL Java_org_attn4j_ops_flash_NativeTileMath_scaleRows(
        JNIEnv *env, jclass cls, jlong m, jdoubleArray factorArray, jint rows, jint cols) {
    double *factors = (*env)->GetPrimitiveArrayCritical(env, factorArray, NULL);
    if (factors == NULL) {
        return;
    }
    scale_rows((float *) (intptr_t) m, factors, rows, cols);
    (*env)->ReleasePrimitiveArrayCritical(env, factorArray, factors, JNI_ABORT);
}

/*
 * The tile products. OpenBLAS packs both operands of every gemm it is given; called once per 512 x 512 tile, it
 * packs the whole P tile, and Q again for every key block. These kernels read Q, P, dS, V and dO where they lie and
 * K^T (or V^T) from a block packed once by the kernel that uses it, so the inner loops are only broadcasts and
 * FMAs: measured on one core, 512 x 512 x 64 products at 140-180 GFLOP/s where OpenBLAS reached 125-137.
 *
 * Packed transposes: the rows of each key block (blockRows of them, the last block possibly fewer) in panels of
 * 32, panel-major: panel p holds, for d = 0..D-1, the 32 values K[p*32 + j][d] (zero past the block's end).
 */
#define PANEL 32

static inline long panels(long rows) {
    return (rows + PANEL - 1) / PANEL;
}

/* One panel: rows [0, n) of k (n <= 32, row stride ld) transposed into panel[x * 32 + j], zeros past n. Full panels
 * gather 16 rows' values of one column at a time. */
AVX512 static void pack_panel(const float *k, long ld, long n, int d, float *panel) {
    if (n == PANEL && ld <= 0x7FFFFFF) {
        __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                         _mm512_set1_epi32((int) ld));
        const float *lower = k;
        const float *upper = k + 16 * ld;
        for (int x = 0; x < d; x++) {
            _mm512_storeu_ps(panel + x * PANEL, _mm512_i32gather_ps(idx, lower + x, 4));
            _mm512_storeu_ps(panel + x * PANEL + 16, _mm512_i32gather_ps(idx, upper + x, 4));
        }
        return;
    }
    for (int x = 0; x < d; x++) {
        for (int j = 0; j < PANEL; j++) {
            panel[x * PANEL + j] = j < n ? k[j * ld + x] : 0.0f;
        }
    }
}

/* out = K's rows [0, rows) (row stride ld) packed per block of blockRows rows, blocks one after the other. */
AVX512 static void pack_transposed(const float *k, long ld, long rows, int d, long blockRows, float *out) {
    for (long b0 = 0; b0 < rows; b0 += blockRows) {
        long n = rows - b0 < blockRows ? rows - b0 : blockRows;
        for (long p = 0; p < panels(n); p++) {
            long left = n - p * PANEL;
            pack_panel(k + (size_t) (b0 + p * PANEL) * ld, ld, left < PANEL ? left : PANEL, d,
                       out + (size_t) p * d * PANEL);
        }
        out += (size_t) panels(n) * d * PANEL;
    }
}

JNIEXPORT void JNICALL Java_org_attn4j_ops_flash_NativeTileMath_packTransposed(
        JNIEnv *env, jclass cls, jlong k, jlong ld, jlong rows, jint d, jlong blockRows, jlong out) {
    pack_transposed((const float *) (intptr_t) k, ld, rows, d, blockRows, (float *) (intptr_t) out);
}

/* mr rows of C = alpha A B^T against one panel: A rows at a (stride lda), the panel at b, cols <= 32 of them kept. */
AVX512 static inline __attribute__((always_inline)) void panel_product(
        const float *a, long lda, const float *b, int d, float *c, long ldc, int cols, float alpha, const int mr) {
    __m512 c0[12];
    __m512 c1[12];
    for (int i = 0; i < mr; i++) {
        c0[i] = _mm512_setzero_ps();
        c1[i] = _mm512_setzero_ps();
    }
    for (int x = 0; x < d; x++) {
        __m512 b0 = _mm512_loadu_ps(b + x * PANEL);
        __m512 b1 = _mm512_loadu_ps(b + x * PANEL + 16);
        for (int i = 0; i < mr; i++) {
            __m512 av = _mm512_set1_ps(a[i * lda + x]);
            c0[i] = _mm512_fmadd_ps(av, b0, c0[i]);
            c1[i] = _mm512_fmadd_ps(av, b1, c1[i]);
        }
    }
    __m512 al = _mm512_set1_ps(alpha);
    __mmask16 m0 = cols >= 16 ? (__mmask16) 0xFFFF : (__mmask16) ((1u << cols) - 1u);
    __mmask16 m1 = cols >= 32 ? (__mmask16) 0xFFFF : cols <= 16 ? (__mmask16) 0 : (__mmask16) ((1u << (cols - 16)) - 1u);
    for (int i = 0; i < mr; i++) {
        _mm512_mask_storeu_ps(c + i * ldc, m0, _mm512_mul_ps(c0[i], al));
        _mm512_mask_storeu_ps(c + i * ldc + 16, m1, _mm512_mul_ps(c1[i], al));
    }
}

/* C[rows x cols] = alpha A[rows x d] B^T, B^T packed from column 0 of a block (cols of them). */
AVX512 static void product_transposed(const float *a, long lda, const float *bt, int d, float *c, long ldc, int rows,
                                      int cols, float alpha) {
    for (int j0 = 0; j0 < cols; j0 += PANEL) {
        const float *b = bt + (size_t) (j0 / PANEL) * d * PANEL;
        int n = cols - j0 < PANEL ? cols - j0 : PANEL;
        int r = 0;
        for (; r + 12 <= rows; r += 12) {
            panel_product(a + (size_t) r * lda, lda, b, d, c + (size_t) r * ldc + j0, ldc, n, alpha, 12);
        }
        for (; r + 4 <= rows; r += 4) {
            panel_product(a + (size_t) r * lda, lda, b, d, c + (size_t) r * ldc + j0, ldc, n, alpha, 4);
        }
        for (; r < rows; r++) {
            panel_product(a + (size_t) r * lda, lda, b, d, c + (size_t) r * ldc + j0, ldc, n, alpha, 1);
        }
    }
}

JNIEXPORT void JNICALL Java_org_attn4j_ops_flash_NativeTileMath_productTransposed(
        JNIEnv *env, jclass cls, jlong a, jlong lda, jlong bt, jint d, jlong c, jlong ldc, jint rows, jint cols,
        jfloat alpha) {
    product_transposed((const float *) (intptr_t) a, lda, (const float *) (intptr_t) bt, d, (float *) (intptr_t) c,
                       ldc, rows, cols, alpha);
}

/*
 * mr rows of C (nv vectors of 16 columns, the last masked by last) = alpha A B (+ C when add): A's element (i, k) at
 * a[i * ai + k * ak], B's rows at b (stride ldb). ai = lda, ak = 1 reads A as it lies; ai = 1, ak = lda reads A^T.
 */
AVX512 static inline __attribute__((always_inline)) void row_product(
        const float *a, long ai, long ak, const float *b, long ldb, int depth, float *c, long ldc, float alpha,
        int add, __mmask16 last, const int mr, const int nv) {
    __m512 acc[24][4];     /* mr * nv <= 24 accumulators are used: registers, not memory */
    for (int i = 0; i < mr; i++) {
        for (int t = 0; t < nv; t++) {
            acc[i][t] = _mm512_setzero_ps();
        }
    }
    for (int k = 0; k < depth; k++) {
        const float *row = b + (size_t) k * ldb;
        __m512 bv[4];
        for (int t = 0; t < nv; t++) {
            bv[t] = t == nv - 1 ? _mm512_maskz_loadu_ps(last, row + 16 * t) : _mm512_loadu_ps(row + 16 * t);
        }
        for (int i = 0; i < mr; i++) {
            __m512 av = _mm512_set1_ps(a[i * ai + k * ak]);
            for (int t = 0; t < nv; t++) {
                acc[i][t] = _mm512_fmadd_ps(av, bv[t], acc[i][t]);
            }
        }
    }
    __m512 al = _mm512_set1_ps(alpha);
    for (int i = 0; i < mr; i++) {
        for (int t = 0; t < nv; t++) {
            __mmask16 m = t == nv - 1 ? last : (__mmask16) 0xFFFF;
            float *out = c + i * ldc + 16 * t;
            __m512 v = _mm512_mul_ps(acc[i][t], al);
            if (add) {
                v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, out));
            }
            _mm512_mask_storeu_ps(out, m, v);
        }
    }
}

/* Rows per micro-tile: 24 accumulators over NV vectors a row (narrow heads take more rows, so that enough FMA chains
 * are in flight), then the leftover rows in pairs and singles. */
#define ROW_PRODUCT_NV(NV) \
    do { \
        int r = 0; \
        for (; r + 24 / (NV) <= rows; r += 24 / (NV)) { \
            row_product(a + r * ai, ai, ak, bcol, ldb, depth, ccol + (size_t) r * ldc, ldc, alpha, add, last, \
                        24 / (NV), NV); \
        } \
        for (; r + 4 <= rows; r += 4) { \
            row_product(a + r * ai, ai, ak, bcol, ldb, depth, ccol + (size_t) r * ldc, ldc, alpha, add, last, 4, NV); \
        } \
        for (; r + 2 <= rows; r += 2) { \
            row_product(a + r * ai, ai, ak, bcol, ldb, depth, ccol + (size_t) r * ldc, ldc, alpha, add, last, 2, NV); \
        } \
        for (; r < rows; r++) { \
            row_product(a + r * ai, ai, ak, bcol, ldb, depth, ccol + (size_t) r * ldc, ldc, alpha, add, last, 1, NV); \
        } \
    } while (0)

/* C[rows x width] = alpha op(A)[rows x depth] B[depth x width] (+ C when add), op(A) as in row_product. */
AVX512 static void product(const float *a, long ai, long ak, const float *b, long ldb, float *c, long ldc, int rows,
                           int width, int depth, float alpha, int add) {
    for (int x0 = 0; x0 < width; x0 += 64) {
        int w = width - x0 < 64 ? width - x0 : 64;
        int nv = (w + 15) / 16;
        __mmask16 last = (w & 15) == 0 ? (__mmask16) 0xFFFF : (__mmask16) ((1u << (w & 15)) - 1u);
        const float *bcol = b + x0;
        float *ccol = c + x0;
        switch (nv) {
            case 4: ROW_PRODUCT_NV(4); break;
            case 3: ROW_PRODUCT_NV(3); break;
            case 2: ROW_PRODUCT_NV(2); break;
            default: ROW_PRODUCT_NV(1); break;
        }
    }
}

JNIEXPORT void JNICALL Java_org_attn4j_ops_flash_NativeTileMath_product(
        JNIEnv *env, jclass cls, jlong a, jlong ai, jlong ak, jlong b, jlong ldb, jlong c, jlong ldc, jint rows,
        jint width, jint depth, jfloat alpha, jboolean add) {
    product((const float *) (intptr_t) a, ai, ak, (const float *) (intptr_t) b, ldb, (float *) (intptr_t) c, ldc,
            rows, width, depth, alpha, add);
}

/*
 * The forward pass's online-softmax step on a partly masked tile whose visible keys form one run of columns per
 * row, [from[r], to[r]) (keys in ascending positions, no padded key in the block: the causal diagonal, a window's
 * edges, documents' ends), in one call: groups of `group` rows, each computing only the 32-column panels some of
 * its rows see: its scores (alpha Q K^T into `scores`, group x cols at most), the hidden columns at -inf, the softmax
 * step (m, l of the tile's rows updated), the accumulator's rows rescaled and acc += P V. On the causal diagonal of
 * 512-key blocks that computes 53 % of the tile in groups of 32 rows, where whole-tile steps compute all of it.
 * A group whose rows see no key is skipped (its rows' m, l and accumulator unchanged). acc is added to when add
 * is set (its rows hold the earlier tiles' sum), else zeroed first (the row block's first tile).
 */
AVX512 static void interval_step(const float *q, long ldq, const float *kt, int d, const float *v, long ldv,
                                 float *acc, long ldacc, float *scores, int rows, int cols, int group, float scale,
                                 const int *from, const int *to, double *m, double *l, int add) {
    double alpha[64];
    double sum[64];
    if (!add) {
        for (int r = 0; r < rows; r++) {
            memset(acc + (size_t) r * ldacc, 0, (size_t) d * sizeof(float));
        }
    }
    for (int r0 = 0; r0 < rows; r0 += group) {
        int n = rows - r0 < group ? rows - r0 : group;
        int lo = cols;
        int hi = 0;
        for (int r = r0; r < r0 + n; r++) {
            if (to[r] > from[r]) {
                lo = from[r] < lo ? from[r] : lo;
                hi = to[r] > hi ? to[r] : hi;
            }
        }
        if (hi <= lo) {
            continue;
        }
        lo = lo / PANEL * PANEL;
        hi = (hi + PANEL - 1) / PANEL * PANEL;
        hi = hi < cols ? hi : cols;
        int w = hi - lo;
        product_transposed(q + (size_t) r0 * ldq, ldq, kt + (size_t) (lo / PANEL) * d * PANEL, d, scores, w, n, w,
                           scale);
        for (int r = 0; r < n; r++) {
            float *row = scores + (size_t) r * w;
            int f = from[r0 + r] - lo;
            int t = to[r0 + r] - lo;
            f = f < 0 ? 0 : f > w ? w : f;
            t = t < f ? f : t > w ? w : t;
            for (int c = 0; c < f; c++) {
                row[c] = -INFINITY;
            }
            for (int c = t; c < w; c++) {
                row[c] = -INFINITY;
            }
        }
        softmax_step(scores, n, w, m + r0, alpha, sum);
        for (int r = 0; r < n; r++) {
            l[r0 + r] = alpha[r] * l[r0 + r] + sum[r];
            if (alpha[r] != 1.0) {
                scale_row(acc + (size_t) (r0 + r) * ldacc, d, (float) alpha[r]);
            }
        }
        product(scores, w, 1, v + (size_t) lo * ldv, ldv, acc + (size_t) r0 * ldacc, ldacc, n, d, w, 1.0f, 1);
    }
}

JNIEXPORT void JNICALL Java_org_attn4j_ops_flash_NativeTileMath_intervalStep(
        JNIEnv *env, jclass cls, jlong q, jlong ldq, jlong kt, jint d, jlong v, jlong ldv, jlong acc, jlong ldacc,
        jlong scores, jint rows, jint cols, jint group, jfloat scale, jintArray fromArray, jintArray toArray,
        jdoubleArray mArray, jdoubleArray lArray, jboolean add) {
    int *from = (*env)->GetPrimitiveArrayCritical(env, fromArray, NULL);
    int *to = from == NULL ? NULL : (*env)->GetPrimitiveArrayCritical(env, toArray, NULL);
    double *m = to == NULL ? NULL : (*env)->GetPrimitiveArrayCritical(env, mArray, NULL);
    double *l = m == NULL ? NULL : (*env)->GetPrimitiveArrayCritical(env, lArray, NULL);
    if (l != NULL) {        /* NULL: out of memory, an OutOfMemoryError is pending for the caller */
        interval_step((const float *) (intptr_t) q, ldq, (const float *) (intptr_t) kt, d,
                      (const float *) (intptr_t) v, ldv, (float *) (intptr_t) acc, ldacc,
                      (float *) (intptr_t) scores, rows, cols, group, scale, from, to, m, l, add);
        (*env)->ReleasePrimitiveArrayCritical(env, lArray, l, 0);
    }
    if (m != NULL) {
        (*env)->ReleasePrimitiveArrayCritical(env, mArray, m, 0);
    }
    if (to != NULL) {
        (*env)->ReleasePrimitiveArrayCritical(env, toArray, to, JNI_ABORT);
    }
    if (from != NULL) {
        (*env)->ReleasePrimitiveArrayCritical(env, fromArray, from, JNI_ABORT);
    }
}

/* Decoding, one query per head: the `group` query rows of q (stride d) that share one key/value head attend to rows
 * [lo, hi) of its k and v (stride d). out's rows (stride d) get softmax(scale q.k) v, lse[r] the natural log of the
 * row's sum of exponentials, scale applied (a row that sees no key: zeros and -inf). The scores take
 * group * (hi - lo) floats of scratch, in base 2 so that exp2_row exponentiates them. The keys and values are read
 * once each, with every query row of the group at a time (they come from memory; the queries stay in L1). */
AVX512 static inline __attribute__((always_inline)) void decode_body(
        const float *q, const float *k, const float *v, const int d, long lo, long hi, int group, float scale,
        float *scores, float *out, float *lse) {
    long n = hi - lo;
    memset(out, 0, (size_t) group * d * sizeof(float));
    if (n <= 0) {
        for (int r = 0; r < group; r++) {
            lse[r] = -INFINITY;
        }
        return;
    }
    const float log2e = 1.4426950408889634f;
    const float s2 = scale * log2e;
    const __mmask16 last = tail(d);
    for (long j = 0; j < n; j++) {
        const float *kr = k + (size_t) (lo + j) * d;
        for (int r = 0; r < group; r++) {
            const float *qr = q + (size_t) r * d;
            __m512 acc = _mm512_setzero_ps();
            for (int c = 0; c < d; c += 16) {
                __mmask16 m = c + 16 <= d ? (__mmask16) 0xFFFF : last;
                acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, qr + c), _mm512_maskz_loadu_ps(m, kr + c), acc);
            }
            scores[(size_t) r * n + j] = _mm512_reduce_add_ps(acc) * s2;
        }
    }
    float inv[group];
    for (int r = 0; r < group; r++) {
        float *row = scores + (size_t) r * n;
        float top = row_max(row, (int) n);
        double sum = exp2_row(row, (int) n, -top, 1.0f);
        lse[r] = (float) (top / (double) log2e + log(sum));
        inv[r] = (float) (1.0 / sum);
    }
    for (long j = 0; j < n; j++) {
        const float *vr = v + (size_t) (lo + j) * d;
        for (int c = 0; c < d; c += 16) {
            __mmask16 m = c + 16 <= d ? (__mmask16) 0xFFFF : last;
            __m512 vv = _mm512_maskz_loadu_ps(m, vr + c);
            for (int r = 0; r < group; r++) {
                float *o = out + (size_t) r * d + c;
                __m512 p = _mm512_set1_ps(scores[(size_t) r * n + j]);
                _mm512_mask_storeu_ps(o, m, _mm512_fmadd_ps(p, vv, _mm512_maskz_loadu_ps(m, o)));
            }
        }
    }
    for (int r = 0; r < group; r++) {
        scale_row(out + (size_t) r * d, d, inv[r]);
    }
}

/* decode_body with the head size a compile-time constant where it is a common one: its loops then unroll and keep
 * no masks (measured at d = 64, 3 query rows a group, 4096 keys: 0.43 ms a layer against 0.78 ms generic). */
AVX512 static void decode_heads(const float *q, const float *k, const float *v, int d, long lo, long hi, int group,
                                float scale, float *scores, float *out, float *lse) {
    switch (d) {
        case 64:
            decode_body(q, k, v, 64, lo, hi, group, scale, scores, out, lse);
            break;
        case 128:
            decode_body(q, k, v, 128, lo, hi, group, scale, scores, out, lse);
            break;
        default:
            decode_body(q, k, v, d, lo, hi, group, scale, scores, out, lse);
    }
}

JNIEXPORT void JNICALL Java_org_attn4j_ops_flash_NativeTileMath_decodeHeads(
        JNIEnv *env, jclass cls, jlong q, jlong k, jlong v, jint d, jlong lo, jlong hi, jint group, jfloat scale,
        jlong scores, jlong out, jlong lse) {
    decode_heads((const float *) (intptr_t) q, (const float *) (intptr_t) k, (const float *) (intptr_t) v, d, lo, hi,
                 group, scale, (float *) (intptr_t) scores, (float *) (intptr_t) out, (float *) (intptr_t) lse);
}
