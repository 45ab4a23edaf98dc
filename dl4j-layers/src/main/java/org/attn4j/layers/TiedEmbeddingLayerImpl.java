package org.attn4j.layers;

import java.nio.DoubleBuffer;
import java.nio.FloatBuffer;
import java.util.Arrays;

import org.bytedeco.javacpp.DoublePointer;
import org.bytedeco.javacpp.FloatPointer;
import org.deeplearning4j.exception.DL4JInvalidInputException;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.workspace.LayerWorkspaceMgr;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * Implementation of {@link TiedEmbeddingLayer}: the columns of the bound head's {@code W} at the token ids; the
 * backward pass adds each step's gradient to the column of its id in the head's gradient of {@code W}, one step
 * after another (ids repeat). The rest of the plumbing (rows, layouts, the gradient table, which is empty) is
 * {@link RowLayerImpl}'s.
 */
public class TiedEmbeddingLayerImpl extends RowLayerImpl<TiedEmbeddingLayer, TiedEmbeddingLayerImpl.Saved> {

    private static final String NAME = "TiedEmbeddingLayer";

    /** The output layer whose weights it embeds with: set by {@link TiedEmbeddings#bind}. */
    private transient org.deeplearning4j.nn.api.Layer head;

    /** What backprop needs: the input and mask it saw (by identity), the ids, the output rows. */
    record Saved(INDArray inputRef, INDArray maskRef, int[] ids, INDArray z) implements SavedForward {
        /** None: every step's embedding is its column, padded or not. */
        @Override
        public INDArray rowMask() {
            return null;
        }
    }

    /**
     * Creates the layer for a configuration whose layer is a {@link TiedEmbeddingLayer}.
     *
     * @param conf     network configuration of this layer
     * @param dataType the network's data type
     */
    public TiedEmbeddingLayerImpl(NeuralNetConfiguration conf, DataType dataType) {
        super(conf, dataType);
    }

    /**
     * Ties this layer to {@code head}, whose parameter {@code W} is {@code [width, vocab]}.
     *
     * @throws IllegalArgumentException if the head has no such W
     */
    void bind(org.deeplearning4j.nn.api.Layer head) {
        INDArray w = head.getParam("W");
        long width = layerConf().getNOut();
        if (w == null || w.rank() != 2 || w.size(0) != width) {
            throw new IllegalArgumentException(NAME + " " + layerId() + ": its head " + layerConf().getHead()
                    + " needs a weight W of [" + width + ", vocab], got " + (w == null ? "none"
                    : Arrays.toString(w.shape())));
        }
        this.head = head;
    }

    /** Whether {@link TiedEmbeddings#bind} tied it to its head. */
    public boolean bound() {
        return head != null;
    }

    private INDArray weights() {
        if (head == null) {
            throw new DL4JInvalidInputException(NAME + " " + layerId() + ": not tied to its head "
                    + layerConf().getHead() + "; call TiedEmbeddings.bind(network) after building, loading or "
                    + "restoring it");
        }
        return head.getParam("W");
    }

    /** The columns of W at the ids, as rows {@code [B*N, width]}. */
    @Override
    protected Saved forward(boolean training, LayerWorkspaceMgr workspaceMgr) {
        checkInput();
        INDArray w = weights();
        int vocab = (int) w.size(1);
        double[] values = toRows(input, 1).toDoubleVector();
        int[] ids = new int[values.length];
        for (int i = 0; i < ids.length; i++) {
            double v = values[i];
            if (!(v >= 0 && v < vocab) || v != Math.rint(v)) {
                throw new DL4JInvalidInputException(NAME + " " + layerId() + ": token ids must be integers in [0, "
                        + vocab + "), got " + v + " at step " + i);
            }
            ids[i] = (int) v;
        }
        INDArray z = Nd4j.pullRows(w.transpose(), 1, ids).castTo(dataType);
        return new Saved(input, maskArray, ids, z.isView() ? z.dup('c') : z);
    }

    /**
     * Adds each step's row of {@code dz} to the column of its id in the head's gradient of W, returns zeros for the
     * ids (they have no gradient).
     */
    @Override
    protected INDArray backpropToInput(Saved f, INDArray dz, LayerWorkspaceMgr workspaceMgr) {
        weights();
        INDArray grad = head.getGradientsViewArray();
        INDArray gw = org.deeplearning4j.nn.params.DefaultParamInitializer.getInstance()
                .getGradientsFromFlattened(head.conf(), grad).get("W");          // [width, vocab]
        int width = (int) layerConf().getNOut();
        double[] rows = dz.dup('c').data().asDouble();
        long[] st = gw.stride();
        boolean direct = st[0] == 1 && st[1] == width && gw.data().offset() == gw.offset()
                && gw.data().length() >= gw.length();
        if (direct) {
            // The view's buffer address is the view's first element (ND4J 1.0.0-M2.1; its asNio() is not: it
            // starts at the whole buffer's): column v is width values from v * width.
            if (gw.dataType() == DataType.FLOAT) {
                FloatBuffer g = new FloatPointer(gw.data().addressPointer()).position(0).limit(gw.length())
                        .capacity(gw.length()).asBuffer();
                for (int i = 0; i < f.ids().length; i++) {
                    int at = f.ids()[i] * width;
                    for (int j = 0; j < width; j++) {
                        g.put(at + j, (float) (g.get(at + j) + rows[i * width + j]));
                    }
                }
            } else {
                DoubleBuffer g = new DoublePointer(gw.data().addressPointer()).position(0)
                        .limit(gw.length()).capacity(gw.length()).asBuffer();
                for (int i = 0; i < f.ids().length; i++) {
                    int at = f.ids()[i] * width;
                    for (int j = 0; j < width; j++) {
                        g.put(at + j, g.get(at + j) + rows[i * width + j]);
                    }
                }
            }
        } else {
            for (int i = 0; i < f.ids().length; i++) {
                gw.getColumn(f.ids()[i]).addi(Nd4j.createFromArray(Arrays.copyOfRange(rows, i * width,
                        (i + 1) * width)).castTo(gw.dataType()));
            }
        }
        return Nd4j.zeros(dataType, dz.size(0), 1);
    }
}
