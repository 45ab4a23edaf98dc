package org.attn4j.layers;

import java.util.Random;

import org.deeplearning4j.gradientcheck.GradientCheckUtil;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * DL4J numerical gradient checks in double precision with the settings of STYLE.md ("Tests"): eps 1e-6, max
 * relative error 1e-3, min absolute error 1e-8, on seeded Gaussian features, one-hot labels and, if asked, the
 * end-padding mask as feature and label mask. Networks use the NoOp updater.
 */
final class GradientChecks {

    static final double EPS = 1e-6;
    static final double MAX_REL_ERROR = 1e-3;
    static final double MIN_ABS_ERROR = 1e-8;

    private GradientChecks() {
    }

    /** The data of one check: features then labels drawn from the seeded {@code rnd}, and the mask. */
    private record Data(INDArray x, INDArray y, INDArray mask) {
        static Data draw(Random rnd, RNNFormat format, int minibatch, int nIn, int n, boolean masked) {
            INDArray x = LayerTestSupport.features(rnd, DataType.DOUBLE, format, minibatch, nIn, n);
            INDArray y = LayerTestSupport.oneHotLabels(rnd, DataType.DOUBLE, format, minibatch, n);
            INDArray mask = masked ? LayerTestSupport.endPaddingMask(DataType.DOUBLE, minibatch, n) : null;
            return new Data(x, y, mask);
        }
    }

    /** Whether {@code net} passes on {@code minibatch} sequences of {@code n} steps with {@code nIn} features. */
    static boolean passes(MultiLayerNetwork net, Random rnd, RNNFormat format, int minibatch, int nIn, int n,
                          boolean masked) {
        Data d = Data.draw(rnd, format, minibatch, nIn, n, masked);
        return GradientCheckUtil.checkGradients(new GradientCheckUtil.MLNConfig().net(net).input(d.x())
                .labels(d.y()).inputMask(d.mask()).labelMask(d.mask())
                .epsilon(EPS).maxRelError(MAX_REL_ERROR).minAbsoluteError(MIN_ABS_ERROR));
    }

    /** As {@link #passes(MultiLayerNetwork, Random, RNNFormat, int, int, int, boolean)}, for a one-input graph. */
    static boolean passes(ComputationGraph net, Random rnd, RNNFormat format, int minibatch, int nIn, int n,
                          boolean masked) {
        Data d = Data.draw(rnd, format, minibatch, nIn, n, masked);
        INDArray[] mask = d.mask() == null ? null : new INDArray[] {d.mask()};
        return GradientCheckUtil.checkGradients(new GradientCheckUtil.GraphConfig().net(net)
                .inputs(new INDArray[] {d.x()}).labels(new INDArray[] {d.y()})
                .inputMask(mask).labelMask(mask)
                .epsilon(EPS).maxRelError(MAX_REL_ERROR).minAbsoluteError(MIN_ABS_ERROR));
    }
}
