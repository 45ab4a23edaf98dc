package org.attn4j.samples.bench;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;

import org.attn4j.distributed.collective.Communicator;
import org.attn4j.distributed.training.DistributedTrainer;
import org.attn4j.distributed.training.ParallelStrategy;
import org.attn4j.distributed.training.ZeroStage;
import org.attn4j.distributed.transport.AeronTransport;
import org.attn4j.samples.metrics.OffHeapMemory;
import org.attn4j.samples.train.GptModel;
import org.deeplearning4j.datasets.iterator.ExistingDataSetIterator;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.dataset.DataSet;
import org.nd4j.linalg.factory.Nd4j;

/**
 * One worker of {@code attn4j bench zero}, in its own process: args {@code STAGE STEPS WIDTH BLOCKS BATCH LENGTH READINGS}.
 * Trains the GPT-like model one epoch of {@code STEPS} Adam steps ({@code fit(iterator)}) sequence-parallel (ring
 * attention over every worker) at ZeRO stage {@code STAGE}, then prints {@code RESULT workers,stage,params,
 * optimizer_state_bytes,gradient_bytes,current_parameter_bytes,measured_offheap_bytes,measured_after_fit_bytes,
 * step_us}:
 * the trainer's own counts of what it keeps by design, and the off-heap bytes this process holds
 * ({@link OffHeapMemory#atRest}) between the steps (after the last step, before the epoch ends) and after
 * {@code fit} has returned with the network whole, each read once every worker is there; and this worker's median
 * step time (the steps after the first).
 */
public final class ZeroBenchWorker {

    static final String RESULT = "RESULT ";

    private ZeroBenchWorker() {
    }

    /** Entry point; see the class comment. */
    public static void main(String[] args) throws Exception {
        ZeroStage stage = ZeroStage.of(Integer.parseInt(args[0]));
        int steps = Integer.parseInt(args[1]);
        int width = Integer.parseInt(args[2]);
        int blocks = Integer.parseInt(args[3]);
        int batch = Integer.parseInt(args[4]);
        int length = Integer.parseInt(args[5]);
        int readings = Integer.parseInt(args[6]);
        Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
        GptModel model = model(width, blocks);
        DataSet data = batch(model, batch, length);
        try (AeronTransport t = AeronTransport.fromEnvironment()) {
            int w = t.worldSize();
            MultiLayerNetwork net = model.build();
            DistributedTrainer trainer = DistributedTrainer.builder(net, t)
                    .strategy(ParallelStrategy.sequence("ring", w).withZero(stage)).build();
            Communicator world = Communicator.world(t);
            long[] betweenSteps = {-1};
            long[] stepStart = {-1};
            List<Long> stepNs = new ArrayList<>();
            // The epoch asks its data source for more between its steps: there the trainer holds what it keeps
            // between steps, and after the last step it is asked once more, before the epoch ends. A step is timed
            // from the batch handed out to the next question.
            trainer.fit(new ExistingDataSetIterator(Collections.nCopies(steps, data)) {
                @Override
                public boolean hasNext() {
                    if (stepStart[0] >= 0) {
                        stepNs.add(System.nanoTime() - stepStart[0]);
                        stepStart[0] = -1;
                    }
                    boolean more = super.hasNext();
                    if (!more && betweenSteps[0] < 0) {
                        betweenSteps[0] = readAtRest(world, readings);
                    }
                    return more;
                }

                @Override
                public DataSet next() {
                    DataSet d = super.next();
                    stepStart[0] = System.nanoTime();
                    return d;
                }
            });
            long afterFit = readAtRest(world, readings);
            if (!Double.isFinite(trainer.score())) {
                throw new IllegalStateException("loss is " + trainer.score());
            }
            if (stepNs.size() != steps) {
                throw new IllegalStateException("bench zero: timed " + stepNs.size() + " steps, expected " + steps);
            }
            // The first step also builds what later steps reuse: the median of the others, when there are others.
            List<Long> timed = new ArrayList<>(stepNs.subList(steps > 1 ? 1 : 0, steps));
            Collections.sort(timed);
            long stepMedianNs = timed.get(timed.size() / 2);
            System.out.printf(Locale.ROOT, "%s%d,%d,%d,%d,%d,%d,%d,%d,%d%n", RESULT, w, stage.stage(),
                    net.numParams(), trainer.optimizerStateBytes(), trainer.gradientBytes(),
                    trainer.currentParameterBytes(), betweenSteps[0], afterFit, stepMedianNs / 1000);
            System.out.flush();
        }
    }

    /**
     * The off-heap bytes at rest, read once every worker is there: a faster peer's next transfer would land in
     * this worker's memory.
     */
    private static long readAtRest(Communicator world, int readings) {
        world.barrier();
        try {
            return OffHeapMemory.atRest(readings);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("bench zero: interrupted while reading memory", e);
        }
    }

    /** The bench's model: GPT-like, float32, Adam, vocabulary 64, 8 heads. */
    static GptModel model(int width, int blocks) {
        return new GptModel(64, width, 8, 8, blocks, false, DataType.FLOAT, 1e-3, 1);
    }

    /** A fixed batch of next-token examples. */
    static DataSet batch(GptModel model, int b, int n) {
        INDArray tokens = Nd4j.zeros(model.type(), b, 1, n);
        INDArray labels = Nd4j.zeros(model.type(), b, model.vocab(), n);
        for (int i = 0; i < b; i++) {
            for (int t = 0; t < n; t++) {
                tokens.putScalar(new int[] {i, 0, t}, (i + t) % model.vocab());
                labels.putScalar(new int[] {i, (i + t + 1) % model.vocab(), t}, 1.0);
            }
        }
        return new DataSet(tokens, labels);
    }
}
