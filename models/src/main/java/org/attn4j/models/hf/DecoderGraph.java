package org.attn4j.models.hf;

import static org.attn4j.layers.RowLayerImpl.release;

import java.lang.reflect.Field;
import java.util.Map;

import org.deeplearning4j.nn.api.Layer;
import org.deeplearning4j.nn.conf.ComputationGraphConfiguration;
import org.deeplearning4j.nn.gradient.DefaultGradient;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.deeplearning4j.nn.params.DefaultParamInitializer;
import org.deeplearning4j.nn.workspace.LayerWorkspaceMgr;
import org.deeplearning4j.optimize.api.TrainingListener;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;
import org.nd4j.linalg.ops.transforms.Transforms;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * {@link HfDecoder}'s graph, with its own training step: the same loss and gradients as DL4J's
 * {@code computeGradientAndScore} (the test holds them equal), computed block by block.
 * <ul>
 *   <li><b>The head and its cross-entropy in chunks of tokens.</b> The logits of a chunk ({@code [T, vocab]}), their
 *   softmax and gradient exist one chunk at a time; the head's weight gradient accumulates over the chunks. DL4J's
 *   output layer holds several {@code [B, vocab, N]} arrays at once (about 2.4 GB per 4096 tokens at a 49 K
 *   vocabulary in float32). The loss is the exact log-softmax, where DL4J clips probabilities at 1e-10.</li>
 *   <li><b>Activation checkpointing</b> ({@link #activationCheckpointing}): the forward pass keeps only each block's
 *   input; the backward pass runs each block's forward again, then its backward, as PyTorch's
 *   {@code torch.utils.checkpoint} does per decoder layer. Activation memory falls from every block's
 *   intermediates to one block's plus a {@code [B, d, N]} array per block, for one more forward pass of the blocks
 *   (and, at ZeRO stage 3, one more gathering of their parameters). The result is the same to the last bit: the
 *   recomputed forward is the same arithmetic on the same inputs.</li>
 * </ul>
 * The layers run through their own {@code activate} and {@code backpropGradient}, so sequence parallelism, packed
 * documents and ZeRO's per-layer gathering work as under DL4J's step. A batch with a feature mask (padding) trains
 * through DL4J's own step, with a warning the first time. A graph DL4J makes itself ({@code ModelSerializer}'s
 * restore, {@code clone}) is a plain {@link ComputationGraph} and trains with DL4J's step.
 */
final class DecoderGraph extends ComputationGraph {

    /** About this many logits per chunk of the head (64 MB in float32). */
    private static final long HEAD_CHUNK_LOGITS = 1L << 24;

    private static final Logger LOG = LoggerFactory.getLogger(DecoderGraph.class);
    /** ComputationGraph's labels, which it offers no getter for. */
    private static final Field LABELS = labelsField();

    private final int blocks;
    private boolean checkpointing;
    private transient boolean warnedAboutMasks;

    DecoderGraph(ComputationGraphConfiguration configuration, int blocks) {
        super(configuration);
        this.blocks = blocks;
    }

    /** Whether the backward pass recomputes each block's activations instead of keeping them. */
    void activationCheckpointing(boolean on) {
        this.checkpointing = on;
    }

    private static Field labelsField() {
        try {
            Field f = ComputationGraph.class.getDeclaredField("labels");
            f.setAccessible(true);
            return f;
        } catch (ReflectiveOperationException | RuntimeException e) {
            throw new ExceptionInInitializerError("DL4J's ComputationGraph has no labels field: " + e);
        }
    }

    private INDArray[] labels() {
        try {
            return (INDArray[]) LABELS.get(this);
        } catch (IllegalAccessException e) {
            throw new IllegalStateException(e);
        }
    }

    /** DL4J's {@code computeGradientAndScore(LayerWorkspaceMgr)} calls this one. */
    @Override
    public void computeGradientAndScore() {
        INDArray[] in = getInputs();
        INDArray[] labels = labels();
        if (in == null || in[0] == null || labels == null || labels[0] == null) {
            super.computeGradientAndScore();                 // DL4J's own step says what is missing
            return;
        }
        INDArray[] featureMasks = getInputMaskArrays();
        if (featureMasks != null && featureMasks.length > 0 && featureMasks[0] != null) {
            if (!warnedAboutMasks) {
                warnedAboutMasks = true;
                LOG.warn("HfDecoder: a batch with a feature mask (padding) trains through DL4J's own step: the "
                        + "whole [tokens, vocab] logits at once{}", checkpointing ? ", without activation "
                        + "checkpointing" : "");
            }
            super.computeGradientAndScore();
            return;
        }
        if (flattenedGradients == null) {
            initGradientsView();
        }
        LayerWorkspaceMgr mgr = LayerWorkspaceMgr.noWorkspaces();
        INDArray[] masks = getLabelMaskArrays();
        INDArray mask = masks == null ? null : masks[0];
        Layer embed = getLayer("embed");
        Layer norm = getLayer("norm");

        // Arrays this step makes and no layer holds any more are closed as soon as they are done with, instead of
        // waiting for the garbage collector (ND4J frees off-heap memory when it collects the Java objects): a long
        // sequence's activations would otherwise pile up between collections.
        // Without checkpointing a block's input is done with once the block has run: its layers keep what their
        // backward passes need. With it, the inputs are what the backward pass recomputes the blocks from.
        INDArray[] blockInputs = new INDArray[blocks + 1];
        INDArray x = embed.activate(in[0], true, mgr);
        for (int l = 0; l < blocks; l++) {
            INDArray out = block(l, x, !checkpointing, mgr);
            if (checkpointing) {
                clearBlock(l);
                blockInputs[l] = x;
            } else {
                release(x);
            }
            x = out;
        }
        blockInputs[blocks] = x;
        INDArray h = norm.activate(x, true, mgr);

        long b = in[0].size(0);
        Head headPass = head(h, labels[0], mask);
        h.close();
        INDArray dx = norm.backpropGradient(headPass.dh(), mgr).getSecond();
        headPass.dh().close();
        norm.clear();
        for (int l = blocks - 1; l >= 0; l--) {
            if (checkpointing) {
                release(block(l, blockInputs[l], true, mgr));     // the recomputed output; the forward's is kept
            }
            INDArray dIn = blockBackward(l, dx, mgr);
            dx.close();
            dx = dIn;
            clearBlock(l);
            release(blockInputs[l + 1]);               // block l's output, block l + 1's input: both done
            blockInputs[l + 1] = null;
        }
        embed.backpropGradient(dx, mgr);
        dx.close();
        release(blockInputs[0]);
        embed.clear();

        score = getConfiguration().getDefaultConfiguration().isMiniBatch() ? headPass.loss() / b : headPass.loss();
        gradient = new DefaultGradient(getGradientsViewArray());
        for (TrainingListener listener : getListeners()) {
            listener.onGradientCalculation(this);
            listener.onBackwardPass(this);
        }
    }

    /** The head's pass: the summed cross-entropy of the scored positions, and dL/dh. */
    private record Head(double loss, INDArray dh) {
    }

    /**
     * Block {@code l} on {@code x}: {@code r1 = x + attn(norm1(x))}, {@code r1 + mlp(norm2(r1))}. The norms' outputs
     * are freed once the attention and the MLP have read them (those layers keep their own rows of them).
     */
    private INDArray block(int l, INDArray x, boolean training, LayerWorkspaceMgr mgr) {
        INDArray n1 = getLayer("norm1_" + l).activate(x, training, mgr);
        INDArray a = getLayer("attn_" + l).activate(n1, training, mgr);
        release(n1);
        INDArray r1 = x.add(a);
        a.close();
        INDArray n2 = getLayer("norm2_" + l).activate(r1, training, mgr);
        INDArray m = getLayer("mlp_" + l).activate(n2, training, mgr);
        release(n2);
        r1.addi(m);
        m.close();
        return r1;
    }

    /** dL/dx of block {@code l} from dL/d(its output), filling its layers' gradients (after a training forward). */
    private INDArray blockBackward(int l, INDArray dOut, LayerWorkspaceMgr mgr) {
        INDArray dNorm2 = getLayer("mlp_" + l).backpropGradient(dOut, mgr).getSecond();
        INDArray dr1Part = getLayer("norm2_" + l).backpropGradient(dNorm2, mgr).getSecond();
        dNorm2.close();
        INDArray dr1 = dOut.add(dr1Part);
        dr1Part.close();
        INDArray dNorm1 = getLayer("attn_" + l).backpropGradient(dr1, mgr).getSecond();
        INDArray dxPart = getLayer("norm1_" + l).backpropGradient(dNorm1, mgr).getSecond();
        dNorm1.close();
        dr1.addi(dxPart);
        dxPart.close();
        return dr1;
    }

    private void clearBlock(int l) {
        for (String name : new String[] {"norm1_", "attn_", "norm2_", "mlp_"}) {
            getLayer(name + l).clear();
        }
    }

    /**
     * The head over the final hidden states {@code h [B, d, N]}: the summed cross-entropy of the scored positions
     * and dL/dh; fills the head's gradients.
     */
    private Head head(INDArray h, INDArray labelIds, INDArray mask) {
        Layer head = getLayer("head");
        INDArray w = head.getParam(DefaultParamInitializer.WEIGHT_KEY);            // [d, V]
        INDArray bias = head.getParam(DefaultParamInitializer.BIAS_KEY);          // [1, V]
        Map<String, INDArray> grads = DefaultParamInitializer.getInstance()
                .getGradientsFromFlattened(head.conf(), head.getGradientsViewArray());
        INDArray gw = grads.get(DefaultParamInitializer.WEIGHT_KEY);
        INDArray gb = grads.get(DefaultParamInitializer.BIAS_KEY);
        gw.assign(0);
        gb.assign(0);
        long batch = h.size(0);
        long n = h.size(2);
        long vocab = w.size(1);
        int chunk = (int) Math.max(1, Math.min(n, HEAD_CHUNK_LOGITS / vocab));
        INDArray dh = Nd4j.create(h.dataType(), h.shape(), 'c');
        // one set of buffers for every chunk: a fresh [T, V] array per chunk cost more in page faults than its math
        INDArray hBuffer = Nd4j.createUninitialized(h.dataType(), new long[] {h.size(1), chunk}, 'f');
        INDArray zBuffer = Nd4j.createUninitialized(h.dataType(), new long[] {chunk, vocab}, 'c');
        INDArray dhBuffer = Nd4j.createUninitialized(h.dataType(), new long[] {h.size(1), chunk}, 'f');
        double loss = 0;
        for (long e = 0; e < batch; e++) {
            for (long t0 = 0; t0 < n; t0 += chunk) {
                long t1 = Math.min(n, t0 + chunk);
                int count = (int) (t1 - t0);
                INDArray hc = columns(hBuffer, count).assign(h.get(NDArrayIndex.point(e), NDArrayIndex.all(),
                        NDArrayIndex.interval(t0, t1)));                            // [d, T]
                INDArray z = count == chunk ? zBuffer : zBuffer.get(NDArrayIndex.interval(0, count),
                        NDArrayIndex.all());
                Nd4j.gemm(hc, w, z, true, false, 1.0, 0.0);                          // logits [T, V]
                z.addiRowVector(bias);
                double[] weight = new double[count];
                int[] ids = new int[count];
                double[] picked = new double[count];
                for (int i = 0; i < count; i++) {
                    weight[i] = mask == null ? 1 : mask.getDouble(e, t0 + i);
                    ids[i] = (int) labelIds.getDouble(e, 0, t0 + i);
                    picked[i] = z.getDouble(i, ids[i]);
                }
                INDArray max = z.max(1);
                z.subiColumnVector(max);
                Transforms.exp(z, false);
                INDArray sum = z.sum(1);
                z.diviColumnVector(sum);                                             // softmax: dL/dz before the label
                for (int i = 0; i < count; i++) {
                    if (weight[i] != 0) {
                        double lse = max.getDouble(i) + Math.log(sum.getDouble(i));
                        loss += weight[i] * (lse - picked[i]);
                        z.putScalar(i, ids[i], z.getDouble(i, ids[i]) - 1);
                    }
                }
                if (mask != null) {
                    z.muliColumnVector(Nd4j.createFromArray(weight).castTo(z.dataType()).reshape(count, 1));
                }
                Nd4j.gemm(hc, z, gw, false, false, 1.0, 1.0);                        // dW += h dz
                gb.addi(z.sum(0).reshape(gb.shape()));
                INDArray dhc = columns(dhBuffer, count);
                Nd4j.gemm(w, z, dhc, false, true, 1.0, 0.0);                         // dh = W dz^T  [d, T]
                dh.get(NDArrayIndex.point(e), NDArrayIndex.all(), NDArrayIndex.interval(t0, t1)).assign(dhc);
            }
        }
        hBuffer.close();
        zBuffer.close();
        dhBuffer.close();
        return new Head(loss, dh);
    }

    /** The first {@code count} columns of an 'f' matrix: contiguous. */
    private static INDArray columns(INDArray fMatrix, int count) {
        return count == fMatrix.size(1) ? fMatrix : fMatrix.get(NDArrayIndex.all(), NDArrayIndex.interval(0, count));
    }
}
