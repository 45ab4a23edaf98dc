package org.attn4j.models.hf;

import java.nio.ByteOrder;
import java.nio.DoubleBuffer;
import java.nio.FloatBuffer;

import org.attn4j.layers.FlashAttentionLayerImpl;
import org.attn4j.ops.Gemm;
import org.attn4j.ops.rope.RotaryEmbedding;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * One decoding step of an {@link HfDecoder}'s graph for one token, computed straight from the graph's parameters:
 * the arithmetic of the graph's {@code rnnTimeStep} on a {@code [1, 1, 1]} input without DL4J's per-layer reshapes,
 * layout permutes, workspaces and element-wise ops, which cost more than the arithmetic at one token. The products
 * are matrix-vector ones ({@link Gemm#vectorTimes}) into buffers kept from step to step, so that a step reads each
 * weight once; the attention layers answer from their own key/value caches ({@link
 * FlashAttentionLayerImpl#attendCached}), so this path and {@code rnnTimeStep} can alternate on one sequence; the
 * norms, biases, rotation, SwiGLU gate and softmax run on Java arrays of a few thousand values, in float64.
 *
 * <p>The small parameters (norm gains, biases) are copied when it is made: make a new one after the weights change.
 * One device only.
 */
final class TokenStep {

    private final HfConfig config;
    private final RotaryEmbedding rope;
    private final INDArray embed;          // [V, d]; null when tied to the head
    private final Block[] blocks;
    private final double[] finalNorm;
    private final INDArray head;           // [d, V]
    private final double[] headBias;
    private final double eps;
    // Off-heap rows the products read and write, kept from step to step.
    private final Row in;
    private final Row hidden;
    private final Row q;
    private final Row k;
    private final Row v;
    private final INDArray qHeads;
    private final INDArray kHeads;
    private final INDArray vHeads;
    private final Row projected;
    private final Row gate;
    private final Row up;
    private final Row logits;
    // The residual stream and scratch, on the heap.
    private final double[] x;
    private final double[] qs;
    private final double[] ks;
    private final double[] gates;
    private final double[] ups;

    /** One decoder block's weights, its small parameters copied, and its attention layer (which holds the cache). */
    private record Block(double[] norm1, FlashAttentionLayerImpl attention, INDArray wq, double[] bq, INDArray wk,
                         double[] bk, INDArray wv, double[] bv, INDArray wo, double[] bo, double[] norm2, INDArray wg,
                         double[] bg, INDArray wu, double[] bu, INDArray wd, double[] bd) {
    }

    TokenStep(HfConfig config, ComputationGraph graph) {
        this.config = config;
        this.rope = config.rope();
        this.eps = config.rmsNormEps();
        this.embed = graph.paramTable().get("embed_W");
        this.blocks = new Block[config.layers()];
        for (int l = 0; l < blocks.length; l++) {
            String a = "attn_" + l + "_";
            String m = "mlp_" + l + "_";
            FlashAttentionLayerImpl attention = (FlashAttentionLayerImpl) graph.getLayer("attn_" + l);
            blocks[l] = new Block(copy(graph, "norm1_" + l + "_g"), attention,
                    graph.getParam(a + "Wq"), copy(graph, a + "bq"), graph.getParam(a + "Wk"), copy(graph, a + "bk"),
                    graph.getParam(a + "Wv"), copy(graph, a + "bv"), graph.getParam(a + "Wo"), copy(graph, a + "bo"),
                    copy(graph, "norm2_" + l + "_g"), graph.getParam(m + "Wg"), copy(graph, m + "bg"),
                    graph.getParam(m + "Wu"), copy(graph, m + "bu"), graph.getParam(m + "Wd"), copy(graph, m + "bd"));
        }
        this.finalNorm = copy(graph, "norm_g");
        this.head = graph.getParam("head_W");
        this.headBias = copy(graph, "head_b");
        DataType type = head.dataType();
        int d = config.hidden();
        int qWidth = config.heads() * config.headDim();
        int kvWidth = config.kvHeads() * config.headDim();
        this.in = new Row(type, d);
        this.hidden = new Row(type, config.intermediate());
        this.q = new Row(type, qWidth);
        this.k = new Row(type, kvWidth);
        this.v = new Row(type, kvWidth);
        this.qHeads = q.array.reshape('c', 1, config.heads(), 1, config.headDim());
        this.kHeads = k.array.reshape('c', 1, config.kvHeads(), 1, config.headDim());
        this.vHeads = v.array.reshape('c', 1, config.kvHeads(), 1, config.headDim());
        this.projected = new Row(type, d);
        this.gate = new Row(type, config.intermediate());
        this.up = new Row(type, config.intermediate());
        this.logits = new Row(type, config.vocab());
        this.x = new double[d];
        this.qs = new double[qWidth];
        this.ks = new double[kvWidth];
        this.gates = new double[config.intermediate()];
        this.ups = new double[config.intermediate()];
    }

    /** A parameter's values, or null for one the graph does not have (an absent bias). */
    private static double[] copy(ComputationGraph graph, String name) {
        INDArray p = graph.paramTable().get(name);
        return p == null ? null : p.toDoubleVector();
    }

    /** The next token's distribution {@code [vocab]} after {@code token}, appending to every layer's cache. */
    double[] next(long token) {
        INDArray row = embed != null ? embed.getRow(token, true) : head.getColumn(token, true);   // tied: W[:, id]
        System.arraycopy(row.toDoubleVector(), 0, x, 0, x.length);
        int headSize = config.headDim();
        RotaryEmbedding.Table table = null;
        for (Block b : blocks) {
            normalise(x, b.norm1(), in);
            product(in, b.wq(), q, qs, b.bq());
            product(in, b.wk(), k, ks, b.bk());
            product(in, b.wv(), v, null, b.bv());
            if (rope != null) {
                if (table == null) {                    // every layer is at the same position
                    int position = b.attention().nextPosition();
                    table = rope.table(headSize, new int[][] {{position}}, position + 1);
                }
                rope.rotateInPlace(qs, 0, config.heads(), table);
                rope.rotateInPlace(ks, 0, config.kvHeads(), table);
            }
            q.write(qs, qs.length);
            k.write(ks, ks.length);
            INDArray o = b.attention().attendCached(qHeads, kHeads, vHeads);
            Gemm.vectorTimes(o.reshape('c', 1, o.length()), b.wo(), projected.array);
            projected.addTo(x, b.bo());
            normalise(x, b.norm2(), in);
            product(in, b.wg(), gate, gates, b.bg());
            product(in, b.wu(), up, ups, b.bu());
            for (int i = 0; i < gates.length; i++) {
                double a = gates[i];
                gates[i] = a / (1 + Math.exp(-a)) * ups[i];           // silu(gate) * up
            }
            hidden.write(gates, gates.length);
            Gemm.vectorTimes(hidden.array, b.wd(), projected.array);
            projected.addTo(x, b.bd());
        }
        normalise(x, finalNorm, in);
        Gemm.vectorTimes(in.array, head, logits.array);
        double[] p = new double[config.vocab()];
        logits.read(p, headBias);
        double max = Double.NEGATIVE_INFINITY;
        for (double z : p) {
            max = Math.max(max, z);
        }
        double sum = 0;
        for (int i = 0; i < p.length; i++) {
            p[i] = Math.exp(p[i] - max);
            sum += p[i];
        }
        for (int i = 0; i < p.length; i++) {
            p[i] /= sum;
        }
        return p;
    }

    /** {@code out = x / sqrt(mean(x^2) + eps) * g}, as the graph's RMSNorm computes it. */
    private void normalise(double[] x, double[] g, Row out) {
        double squares = 0;
        for (double value : x) {
            squares += value * value;
        }
        double r = 1 / Math.sqrt(squares / x.length + eps);
        for (int j = 0; j < x.length; j++) {
            out.set(j, x[j] * r * g[j]);
        }
    }

    /** {@code out = in w}, then plus the bias into {@code values} (when given) and back into {@code out}. */
    private static void product(Row in, INDArray w, Row out, double[] values, double[] bias) {
        Gemm.vectorTimes(in.array, w, out.array);
        if (values != null) {
            out.read(values, bias);
        } else if (bias != null) {
            for (int i = 0; i < bias.length; i++) {
                out.set(i, out.get(i) + bias[i]);
            }
        }
    }

    /** A row {@code [1, n]} off the heap for the products, and its buffer seen from Java. */
    private static final class Row {
        final INDArray array;
        private final FloatBuffer floats;
        private final DoubleBuffer doubles;

        Row(DataType type, int n) {
            array = Nd4j.create(type, 1, n);
            var bytes = array.data().asNio().order(ByteOrder.nativeOrder());
            floats = type == DataType.FLOAT ? bytes.asFloatBuffer() : null;
            doubles = type == DataType.FLOAT ? null : bytes.asDoubleBuffer();
        }

        double get(int i) {
            return floats != null ? floats.get(i) : doubles.get(i);
        }

        void set(int i, double value) {
            if (floats != null) {
                floats.put(i, (float) value);
            } else {
                doubles.put(i, value);
            }
        }

        /** Its first {@code out.length} values into {@code out}, plus {@code bias} when given. */
        void read(double[] out, double[] bias) {
            for (int i = 0; i < out.length; i++) {
                out[i] = get(i) + (bias == null ? 0 : bias[i]);
            }
        }

        void write(double[] values, int n) {
            for (int i = 0; i < n; i++) {
                set(i, values[i]);
            }
        }

        /** Adds its first {@code x.length} values (and the bias) to {@code x}. */
        void addTo(double[] x, double[] bias) {
            for (int i = 0; i < x.length; i++) {
                x[i] += get(i) + (bias == null ? 0 : bias[i]);
            }
        }

    }
}
