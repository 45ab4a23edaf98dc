package org.attn4j.models.hf;

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
 * documents and ZeRO's per-layer gathering work as under DL4J's step. A graph restored by DL4J itself
 * ({@code ModelSerializer}) is a plain {@link ComputationGraph} and trains with DL4J's step.
 */
final class DecoderGraph extends ComputationGraph {

    /** About this many logits per chunk of the head (64 MB in float32). */
    private static final long HEAD_CHUNK_LOGITS = 1L << 24;

    private final int blocks;
    private boolean checkpointing;
    /** ComputationGraph's labels, which it offers no getter for. */
    private static final Field LABELS = labelsField();

    DecoderGraph(ComputationGraphConfiguration configuration, int blocks) {
        super(configuration);
        this.blocks = blocks;
    }

    /** Whether the backward pass recomputes each block's activations instead of keeping them. */
    void activationCheckpointing(boolean on) {
        this.checkpointing = on;
    }

    boolean activationCheckpointing() {
        return checkpointing;
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

    @Override
    public void computeGradientAndScore() {
        computeGradientAndScore(LayerWorkspaceMgr.noWorkspaces());
    }

    @Override
    public void computeGradientAndScore(LayerWorkspaceMgr workspaceMgr) {
        INDArray[] in = getInputs();
        INDArray[] labels = labels();
        if (in == null || in[0] == null || labels == null || labels[0] == null) {
            super.computeGradientAndScore(workspaceMgr);
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

        INDArray[] blockInputs = new INDArray[blocks];
        INDArray x = embed.activate(in[0], true, mgr);
        for (int l = 0; l < blocks; l++) {
            blockInputs[l] = x;
            x = block(l, x, !checkpointing, mgr);
            if (checkpointing) {
                clearBlock(l);
            }
        }
        INDArray h = norm.activate(x, true, mgr);

        long b = in[0].size(0);
        Head headPass = head(h, labels[0], mask);
        INDArray dx = norm.backpropGradient(headPass.dh(), mgr).getSecond();
        for (int l = blocks - 1; l >= 0; l--) {
            if (checkpointing) {
                block(l, blockInputs[l], true, mgr);
            }
            dx = blockBackward(l, dx, mgr);
            clearBlock(l);
            blockInputs[l] = null;
        }
        embed.backpropGradient(dx, mgr);
        norm.clear();
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

    /** Block {@code l} on {@code x}: {@code r1 = x + attn(norm1(x))}, {@code r1 + mlp(norm2(r1))}. */
    private INDArray block(int l, INDArray x, boolean training, LayerWorkspaceMgr mgr) {
        INDArray a = getLayer("attn_" + l).activate(getLayer("norm1_" + l).activate(x, training, mgr), training,
                mgr);
        INDArray r1 = x.add(a);
        INDArray m = getLayer("mlp_" + l).activate(getLayer("norm2_" + l).activate(r1, training, mgr), training,
                mgr);
        return r1.addi(m);
    }

    /** dL/dx of block {@code l} from dL/d(its output), filling its layers' gradients (after a training forward). */
    private INDArray blockBackward(int l, INDArray dOut, LayerWorkspaceMgr mgr) {
        INDArray dNorm2 = getLayer("mlp_" + l).backpropGradient(dOut, mgr).getSecond();
        INDArray dr1 = dOut.add(getLayer("norm2_" + l).backpropGradient(dNorm2, mgr).getSecond());
        INDArray dNorm1 = getLayer("attn_" + l).backpropGradient(dr1, mgr).getSecond();
        return dr1.addi(getLayer("norm1_" + l).backpropGradient(dNorm1, mgr).getSecond());
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
        double loss = 0;
        for (long e = 0; e < batch; e++) {
            for (long t0 = 0; t0 < n; t0 += chunk) {
                long t1 = Math.min(n, t0 + chunk);
                int count = (int) (t1 - t0);
                INDArray hc = h.get(NDArrayIndex.point(e), NDArrayIndex.all(), NDArrayIndex.interval(t0, t1))
                        .dup('f');                                                   // [d, T]
                INDArray z = hc.transpose().mmul(w).addiRowVector(bias);             // [T, V]
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
                Nd4j.gemm(hc, z, gw, false, false, 1.0, 1.0);                        // dW += h^T dz
                gb.addi(z.sum(0).reshape(gb.shape()));
                dh.get(NDArrayIndex.point(e), NDArrayIndex.all(), NDArrayIndex.interval(t0, t1))
                        .assign(w.mmul(z.transpose()));                              // dh = W dz^T  [d, T]
            }
        }
        return new Head(loss, dh);
    }
}
