package org.attn4j.layers;

import java.util.Arrays;
import java.util.function.Supplier;

import org.deeplearning4j.exception.DL4JInvalidInputException;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.workspace.ArrayType;
import org.deeplearning4j.nn.workspace.LayerWorkspaceMgr;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.memory.MemoryWorkspace;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * What the attention layer implementations share at the edge of DL4J: its RNN layouts ({@code [B, F, N]}
 * NCW, {@code [B, N, F]} NWC) to rows {@code [B*N, F]} (row {@code b*N + t}) and heads {@code [B, h, N, hs]}
 * (C order) and back, input and mask checks, affine projections on rows and their backprop.
 */
final class AttentionRows {

    private AttentionRows() {
    }

    /** The sequence length of {@code input} in {@code format}. */
    static long timeSteps(INDArray input, RNNFormat format) {
        return input.size(format == RNNFormat.NCW ? 2 : 1);
    }

    /**
     * Checks a rank-3 input with {@code nIn} features and a {@code [B, N]} mask (or none).
     *
     * @throws DL4JInvalidInputException naming the layer, the expected and the actual shape
     */
    static void checkInput(String layer, INDArray input, INDArray mask, RNNFormat format, long nIn, String id) {
        long features = input.rank() == 3 ? input.size(format == RNNFormat.NCW ? 1 : 2) : -1;
        if (features != nIn) {
            String expected = format == RNNFormat.NCW ? "[B, nIn, N]" : "[B, N, nIn]";
            throw new DL4JInvalidInputException(layer + ": input must have shape " + expected + " with nIn = " + nIn
                    + " (" + format + "), got " + Arrays.toString(input.shape()) + " " + id);
        }
        long n = timeSteps(input, format);
        if (mask != null && (mask.rank() != 2 || mask.size(0) != input.size(0) || mask.size(1) != n)) {
            throw new DL4JInvalidInputException(layer + ": mask must have shape [B, N] = [" + input.size(0) + ", "
                    + n + "], got " + Arrays.toString(mask.shape()) + " " + id);
        }
    }

    /** A detached C-order copy of the mask {@code [B, N]} as a column {@code [B*N, 1]}, or null for none. */
    static INDArray rowMask(INDArray mask, DataType dataType) {
        return mask == null ? null : mask.castTo(dataType).dup('c').reshape('c', mask.length(), 1);
    }

    /** {@code [B, F, N]} (NCW) or {@code [B, N, F]} (NWC) to a fresh C-order {@code [B*N, F]}. */
    static INDArray toRows(INDArray a, long features, RNNFormat format) {
        INDArray bnf = format == RNNFormat.NCW ? a.permute(0, 2, 1) : a;
        return bnf.dup('c').reshape('c', a.size(0) * bnf.size(1), features);
    }

    /** Rows {@code [B*N, F]} to a new array of the given workspace type in {@code format}. */
    static INDArray fromRows(INDArray rows, long b, long n, RNNFormat format, LayerWorkspaceMgr workspaceMgr,
                             ArrayType type, DataType dataType) {
        long f = rows.size(1);
        INDArray bnf = rows.reshape('c', b, n, f);
        if (format == RNNFormat.NCW) {
            INDArray out = workspaceMgr.createUninitialized(type, dataType, new long[] {b, f, n}, 'c');
            return out.assign(bnf.permute(0, 2, 1));
        }
        return workspaceMgr.createUninitialized(type, dataType, new long[] {b, n, f}, 'c').assign(bnf);
    }

    /** Rows {@code [B*N, h*hs]} to C-order heads {@code [B, h, N, hs]}. */
    static INDArray toHeads(INDArray rows, long b, long n, int h) {
        long hs = rows.size(1) / h;
        return rows.reshape('c', b, n, h, hs).permute(0, 2, 1, 3).dup('c');
    }

    /** Heads {@code [B, h, N, hs]} to C-order rows {@code [B*N, h*hs]}. */
    static INDArray fromHeads(INDArray heads) {
        long b = heads.size(0);
        long h = heads.size(1);
        long n = heads.size(2);
        long hs = heads.size(3);
        return heads.permute(0, 2, 1, 3).dup('c').reshape('c', b * n, h * hs);
    }

    /** {@code in w + bias} for rows {@code in}. */
    static INDArray affine(INDArray in, INDArray w, INDArray bias) {
        INDArray out = in.mmul(w);
        return bias == null ? out : out.addiRowVector(bias);
    }

    /**
     * Backprop of {@code out = in w + bias}: writes dL/dw into {@code dW} and dL/dbias into {@code dBias}
     * (gradient views; null for a projection without bias), returns dL/din.
     */
    static INDArray backpropAffine(INDArray in, INDArray dOut, INDArray w, INDArray dW, INDArray dBias) {
        Nd4j.gemm(in, dOut, dW, true, false, 1.0, 0.0);
        if (dBias != null) {
            dBias.assign(dOut.sum(true, 0));
        }
        return dOut.mmul(w.transpose());
    }

    /** Runs {@code forward} so that the arrays it makes outlive the workspaces open now (kept for backprop). */
    static <T> T outsideWorkspaces(Supplier<T> forward) {
        MemoryWorkspace outside = Nd4j.getWorkspaceManager().scopeOutOfWorkspaces();
        try {
            return forward.get();
        } finally {
            outside.close();
        }
    }
}
