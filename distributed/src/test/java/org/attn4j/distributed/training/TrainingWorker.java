package org.attn4j.distributed.training;

import java.nio.file.Path;
import java.util.List;

import org.attn4j.distributed.sequence.SequenceAlgorithm;
import org.attn4j.distributed.transport.AeronTransport;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.dataset.DataSet;
import org.nd4j.linalg.factory.Nd4j;

/**
 * A worker process of {@link TrainingProcessTest}: trains the GPT-like test network over Aeron, checkpointing
 * every 5 steps into {@code args[0]}, up to step {@code args[1]}, resuming from the newest complete checkpoint if
 * {@code args[2]} is "resume"; {@code args[3..6]} optionally name the strategy (as in
 * {@link DistributedTrainerParityTest}), data-parallel size, sequence-parallel size and ZeRO stage; the default
 * is ring, (DP 2, SP 2), ZeRO stage 2. Prints {@code LOSS step value} per step.
 */
public final class TrainingWorker {

    private TrainingWorker() {
    }

    /** Entry point; see the class comment. */
    public static void main(String[] args) {
        train(args, CheckpointStore.ShardOutput.WHOLE);
    }

    /** Trains as the class comment says, writing checkpoint shards through {@code shardOutput}. */
    static void train(String[] args, CheckpointStore.ShardOutput shardOutput) {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        Path dir = Path.of(args[0]);
        int steps = Integer.parseInt(args[1]);
        boolean resume = args.length > 2 && args[2].equals("resume");
        String name = args.length > 3 ? args[3] : "ring";
        ParallelStrategy strategy = args.length > 3
                ? DistributedTrainerParityTest.strategy(name, Integer.parseInt(args[5]))
                        .withDataParallel(Integer.parseInt(args[4])).withZero(ZeroStage.valueOf(args[6]))
                : ParallelStrategy.sequence("ring", 2).withDataParallel(2)
                        .withZero(ZeroStage.GRADIENTS);
        boolean linear = name.equals("lasp");
        int kvHeads = name.equals("ulysses") ? TrainingFixtures.HEADS : TrainingFixtures.HEADS / 2;
        long seed = args.length > 3 ? 42 + name.hashCode() : 3;
        List<DataSet> batches = TrainingFixtures.batches(DataType.DOUBLE, steps, 4, 16, args.length > 3 ? seed : 7);
        try (AeronTransport t = AeronTransport.fromEnvironment()) {
            MultiLayerNetwork net = TrainingFixtures.gpt(DataType.DOUBLE, linear, kvHeads, seed);
            DistributedTrainer trainer = DistributedTrainer.builder(net, t).strategy(strategy)
                    .checkpoints(dir, 5).run("process-test").resume(resume).shardOutput(shardOutput).build();
            for (int i = Math.max(0, trainer.resumedFromStep()); i < steps; i++) {
                System.out.println("LOSS " + i + " " + trainer.fit(batches.get(i)));
            }
            org.attn4j.distributed.collective.Communicator.world(t).barrier();
        }
        System.out.flush();
    }
}
