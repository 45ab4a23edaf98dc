package org.attn4j.distributed.training;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

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
 * slice is cut along runs of parameters that share one updater configuration, read from the layers' own
 * configurations (DL4J's updater is never built, so its state for the whole vector never exists), and each part
 * gets a fresh {@link GradientUpdater} over a state array of {@link IUpdater#stateSize} of the part: the updaters
 * DL4J ships are element-wise, so a slice updates exactly as the same elements of the whole vector would.
 * <pre>
 *   update = updater(gradient / batch, iteration, epoch)      params -= update      (DL4J's step)
 * </pre>
 * Configurations a slice cannot reproduce are refused when the trainer is built: regularization (L1, L2, weight
 * decay: their score terms and per-parameter state), gradient normalization (per-layer norms), and parameters
 * DL4J does not divide by the minibatch size (batch normalization statistics).
 */
final class ShardedUpdater {

    /** One run of parameters {@code [from, to)} of the flat vector with one updater configuration. */
    record Run(long from, long to, IUpdater config) {
    }

    /** One run's share of the slice. */
    private record Part(long from, long to, GradientUpdater<?> updater, INDArray state) {
    }

    private final long from;
    private final List<Part> parts = new ArrayList<>();

    /**
     * @param runs the network's parameter runs, in flat order (see {@link #runs})
     * @param from first flat parameter index of the slice
     * @param to   one past the last
     * @param type the parameters' data type
     */
    ShardedUpdater(List<Run> runs, long from, long to, DataType type) {
        this.from = from;
        for (Run run : runs) {
            long lo = Math.max(from, run.from());
            long hi = Math.min(to, run.to());
            if (lo >= hi) {
                continue;
            }
            long stateSize = run.config().stateSize(hi - lo);
            INDArray state = stateSize == 0 ? null : Nd4j.zeros(type, 1, stateSize);
            parts.add(new Part(lo, hi, run.config().instantiate(state, true), state));
        }
    }

    /**
     * The parameter runs of {@code layers} (in flat order): consecutive parameters with equal updater
     * configurations form one run.
     *
     * @throws IllegalArgumentException for a configuration a slice cannot reproduce
     */
    static List<Run> runs(List<Trainable> layers) {
        List<Run> runs = new ArrayList<>();
        long offset = 0;
        for (Trainable layer : layers) {
            for (Map.Entry<String, INDArray> p : layer.paramTable(false).entrySet()) {
                checkSupported(layer, p.getKey());
                long length = p.getValue().length();
                IUpdater config = layer.getConfig().getUpdaterByParam(p.getKey());
                Run last = runs.isEmpty() ? null : runs.get(runs.size() - 1);
                if (last != null && last.config().equals(config)) {
                    runs.set(runs.size() - 1, new Run(last.from(), offset + length, config));
                } else if (length > 0) {
                    runs.add(new Run(offset, offset + length, config));
                }
                offset += length;
            }
        }
        return runs;
    }

    private static void checkSupported(Trainable layer, String param) {
        String name = layer.getConfig().getLayerName() + "." + param;
        List<?> regularization = layer.getConfig().getRegularizationByParam(param);
        if (regularization != null && !regularization.isEmpty()) {
            throw new IllegalArgumentException("DistributedTrainer: parameter " + name + " has regularization "
                    + regularization + "; sharded updates support none yet (remove l1/l2/weightDecay from the "
                    + "configuration)");
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

    /**
     * Takes this slice's state out of a DL4J updater of the whole vector (a network restored with its updater,
     * or trained with DL4J's own {@code fit} before). DL4J keeps a block's state as {@code k} arrays of the
     * block's length one after another (Adam: m, then v), and so does a part here.
     */
    void importFrom(BaseMultiLayerUpdater<?> dl4j) {
        for (UpdaterBlock block : dl4j.getUpdaterBlocks()) {
            INDArray view = block.getUpdaterView();
            long n = block.getParamOffsetEnd() - block.getParamOffsetStart();
            if (view == null || n == 0) {
                continue;
            }
            INDArray flat = view.reshape(view.length());
            long k = view.length() / n;
            for (Part p : parts) {
                long lo = Math.max(p.from(), block.getParamOffsetStart());
                long hi = Math.min(p.to(), block.getParamOffsetEnd());
                if (lo >= hi || p.state() == null) {
                    continue;
                }
                INDArray mine = p.state().reshape(p.state().length());
                long m = p.to() - p.from();
                for (long j = 0; j < k; j++) {
                    long src = j * n + lo - block.getParamOffsetStart();
                    long dst = j * m + lo - p.from();
                    mine.get(NDArrayIndex.interval(dst, dst + hi - lo)).assign(
                            flat.get(NDArrayIndex.interval(src, src + hi - lo)));
                }
            }
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
     * The sum of the squares of the slice's gradient over the parameters that train: those of an {@code Sgd} updater
     * at a fixed rate of zero are frozen, and PyTorch's {@code clip_grad_norm_} sees no gradient of a frozen
     * parameter either.
     *
     * @param gradient the slice's gradient, {@code to - from} elements
     */
    double trainedSquares(INDArray gradient) {
        INDArray g = gradient.reshape(gradient.length());
        double sum = 0;
        for (Part p : parts) {
            if (frozen(p.updater().getConfig())) {
                continue;
            }
            double norm = g.get(NDArrayIndex.interval(p.from() - from, p.to() - from)).norm2Number().doubleValue();
            sum += norm * norm;
        }
        return sum;
    }

    /** Whether {@code c} never moves its parameters: SGD at a fixed rate of zero. */
    static boolean frozen(IUpdater c) {
        return c instanceof org.nd4j.linalg.learning.config.Sgd sgd && sgd.getLearningRateSchedule() == null
                && sgd.getLearningRate() == 0;
    }

    /**
     * One step on the slice: {@code params[from, to) -= updater(gradient / divisor)}.
     *
     * @param gradient the summed gradient of the slice, {@code to - from} elements (overwritten with the update)
     * @param params   the whole flattened parameter vector, updated in place on the slice
     * @param divisor  the minibatch size to divide by, 1 for none
     */
    void step(INDArray gradient, INDArray params, int iteration, int epoch, double divisor) {
        INDArray g = gradient.reshape(gradient.length());
        if (divisor != 1) {
            g.divi(divisor);
        }
        INDArray flat = params.reshape(params.length());
        for (Part p : parts) {
            INDArray update = g.get(NDArrayIndex.interval(p.from() - from, p.to() - from)).reshape(1,
                    p.to() - p.from());
            p.updater().applyUpdater(update, iteration, epoch);
            flat.get(NDArrayIndex.interval(p.from(), p.to())).subi(update.reshape(p.to() - p.from()));
        }
    }
}
