package org.attn4j.distributed.training;

import java.util.ArrayList;
import java.util.List;

import org.deeplearning4j.nn.api.Trainable;
import org.deeplearning4j.nn.conf.GradientNormalization;
import org.deeplearning4j.nn.updater.BaseMultiLayerUpdater;
import org.deeplearning4j.nn.updater.UpdaterBlock;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;
import org.nd4j.linalg.learning.GradientUpdater;
import org.nd4j.linalg.learning.config.IUpdater;

/**
 * The network's DL4J updaters (Adam, SGD, ...) applied to one slice {@code [from, to)} of the flattened parameter
 * vector, with optimizer state for that slice only (ZeRO stage 1 and up; the whole vector for stage 0). The
 * slice is cut along DL4J's own updater blocks, and each part gets a fresh {@link GradientUpdater} of the
 * block's configuration over a state array of {@link IUpdater#stateSize} of the part: the updaters DL4J ships
 * are element-wise, so a slice updates exactly as the same elements of the whole vector would.
 * <pre>
 *   update = updater(gradient / batch, iteration, epoch)      params -= update      (DL4J's step)
 * </pre>
 * Configurations a slice cannot reproduce are refused when the trainer is built: regularization (L1, L2, weight
 * decay: their score terms and per-parameter state), gradient normalization (per-layer norms), and parameters
 * DL4J does not divide by the minibatch size (batch normalization statistics).
 */
final class ShardedUpdater {

    /** One updater block's share of the slice. */
    private record Part(long from, long to, GradientUpdater updater, INDArray state) {
    }

    private final long from;
    private final long to;
    private final List<Part> parts = new ArrayList<>();

    /**
     * @param updater the network's updater (its blocks tell which configuration covers which parameters)
     * @param from    first flat parameter index of the slice
     * @param to      one past the last
     * @param type    the parameters' data type
     * @throws IllegalArgumentException for a configuration a slice cannot reproduce
     */
    ShardedUpdater(BaseMultiLayerUpdater<?> updater, long from, long to, DataType type) {
        this.from = from;
        this.to = to;
        for (UpdaterBlock block : updater.getUpdaterBlocks()) {
            for (UpdaterBlock.ParamState p : block.getLayersAndVariablesInBlock()) {
                checkSupported(p.getLayer(), p.getParamName());
            }
            long lo = Math.max(from, block.getParamOffsetStart());
            long hi = Math.min(to, block.getParamOffsetEnd());
            if (lo >= hi) {
                continue;
            }
            IUpdater config = block.getGradientUpdater().getConfig();
            long stateSize = config.stateSize(hi - lo);
            INDArray state = stateSize == 0 ? null : Nd4j.zeros(type, 1, stateSize);
            parts.add(new Part(lo, hi, config.instantiate(state, true), state));
        }
    }

    private static void checkSupported(Trainable layer, String param) {
        String name = layer.getConfig().getLayerName() + "." + param;
        java.util.List<?> regularization = layer.getConfig().getRegularizationByParam(param);
        if (regularization != null && !regularization.isEmpty()) {
            throw new IllegalArgumentException("DistributedTrainer: parameter " + name + " has regularization "
                    + layer.getConfig().getRegularizationByParam(param) + "; sharded updates support none yet "
                    + "(remove l1/l2/weightDecay from the configuration)");
        }
        GradientNormalization g = layer.getConfig().getGradientNormalization();
        if (g != null && g != GradientNormalization.None) {
            throw new IllegalArgumentException("DistributedTrainer: layer " + layer.getConfig().getLayerName()
                    + " uses gradient normalization " + g + ", which needs whole-layer norms; not supported");
        }
        if (!layer.updaterDivideByMinibatch(param)) {
            throw new IllegalArgumentException("DistributedTrainer: parameter " + name + " is not a gradient DL4J "
                    + "divides by the minibatch (e.g. batch normalization statistics); not supported");
        }
    }

    /** The first flat index this updater covers. */
    long from() {
        return from;
    }

    /** One past the last. */
    long to() {
        return to;
    }

    /** The optimizer state arrays of the slice, in order (for checkpoints; empty for a stateless updater). */
    List<INDArray> states() {
        List<INDArray> out = new ArrayList<>();
        for (Part p : parts) {
            if (p.state() != null) {
                out.add(p.state());
            }
        }
        return out;
    }

    /**
     * Restores the state {@link #states()} returned (from a checkpoint of the same slice).
     *
     * @throws IllegalArgumentException if the arrays do not match this slice's state
     */
    void restore(List<INDArray> saved) {
        List<INDArray> mine = states();
        if (saved.size() != mine.size()) {
            throw new IllegalArgumentException("optimizer state of " + saved.size() + " arrays; this slice holds "
                    + mine.size());
        }
        for (int i = 0; i < mine.size(); i++) {
            if (saved.get(i).length() != mine.get(i).length()) {
                throw new IllegalArgumentException("optimizer state array " + i + " has " + saved.get(i).length()
                        + " elements; this slice holds " + mine.get(i).length());
            }
            mine.get(i).assign(saved.get(i).reshape(mine.get(i).shape()));
        }
    }

    /** Bytes of optimizer state held for the slice. */
    long stateBytes() {
        long bytes = 0;
        for (Part p : parts) {
            if (p.state() != null) {
                bytes += p.state().length() * p.state().dataType().width();
            }
        }
        return bytes;
    }

    /**
     * One step on the slice: {@code params[from, to) -= updater(gradient / divisor)}.
     *
     * @param gradient the summed gradient of the slice, {@code to - from} elements (it is overwritten)
     * @param params   the whole flattened parameter vector, updated in place on the slice
     * @param divisor  the minibatch size to divide by, 1 for none
     */
    void step(INDArray gradient, INDArray params, int iteration, int epoch, double divisor) {
        INDArray g = gradient.reshape(1, gradient.length());
        if (divisor != 1) {
            g.divi(divisor);
        }
        INDArray flat = params.reshape(1, params.length());
        for (Part p : parts) {
            INDArray gp = g.get(NDArrayIndex.point(0), NDArrayIndex.interval(p.from() - from, p.to() - from))
                    .reshape(1, p.to() - p.from());
            INDArray update = gp.dup();
            p.updater().applyUpdater(update, iteration, epoch);
            flat.get(NDArrayIndex.point(0), NDArrayIndex.interval(p.from(), p.to())).subi(update.reshape(
                    p.to() - p.from()));
        }
    }
}
