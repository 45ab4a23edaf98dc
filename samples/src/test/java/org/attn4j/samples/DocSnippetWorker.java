package org.attn4j.samples;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.attn4j.distributed.collective.CollectiveHandle;
import org.attn4j.distributed.collective.Communicator;
import org.attn4j.distributed.collective.Group;
import org.attn4j.distributed.training.DistributedTrainer;
import org.attn4j.distributed.training.ParallelStrategy;
import org.attn4j.distributed.training.ZeroStage;
import org.attn4j.distributed.transport.AeronTransport;
import org.attn4j.layers.FlashAttentionLayer;
import org.deeplearning4j.datasets.iterator.ExistingDataSetIterator;
import org.deeplearning4j.nn.conf.MultiLayerConfiguration;
import org.deeplearning4j.nn.conf.NeuralNetConfiguration;
import org.deeplearning4j.nn.conf.RNNFormat;
import org.deeplearning4j.nn.conf.layers.EmbeddingSequenceLayer;
import org.deeplearning4j.nn.conf.layers.RnnOutputLayer;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.deeplearning4j.optimize.listeners.ScoreIterationListener;
import org.nd4j.linalg.activations.Activation;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.dataset.DataSet;
import org.nd4j.linalg.dataset.api.iterator.DataSetIterator;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.learning.config.Adam;
import org.nd4j.linalg.lossfunctions.LossFunctions;

/**
 * The code blocks of README.md and docs/ that need worker processes, as they are written there (checked by
 * {@link DocSnippetsTest}), run by each of four workers the test starts with the local launcher. Argument: the
 * directory for the checkpoints. Prints "SNIPPETS OK" when every block ran.
 */
public final class DocSnippetWorker {

    static final int WORKERS = 4;
    static final int STEPS = 20;
    static final int VOCAB = 20;

    private DocSnippetWorker() {
    }

    public static void main(String[] args) throws Exception {
        Nd4j.setDefaultDataTypes(DataType.FLOAT, DataType.FLOAT);
        Path checkpointDir = Path.of(args[0]);
        readme(conf(), batches(2));
        training(conf(), batches(STEPS), checkpointDir);
        collectives();
        System.out.println("SNIPPETS OK");
    }

    /** A small GPT-like net, the same on every worker. */
    static MultiLayerConfiguration conf() {
        return new NeuralNetConfiguration.Builder().seed(42).updater(new Adam(1e-3)).list()
                .layer(new EmbeddingSequenceLayer.Builder().nIn(VOCAB).nOut(16).outputDataFormat(RNNFormat.NCW)
                        .build())
                .layer(new FlashAttentionLayer.Builder().nIn(16).nOut(16).nHeads(2).causal(true).build())
                .layer(new RnnOutputLayer.Builder(LossFunctions.LossFunction.MCXENT).activation(Activation.SOFTMAX)
                        .nIn(16).nOut(VOCAB).dataFormat(RNNFormat.NCW).build())
                .build();
    }

    private static void readme(MultiLayerConfiguration conf, DataSetIterator iterator) throws Exception {
        // snippet: readme-trainer
        // the same network, sequence-parallel over 4 worker processes: every worker runs this
        try (AeronTransport transport = AeronTransport.fromEnvironment()) {   // rank and peers from the launcher
            MultiLayerNetwork net = new MultiLayerNetwork(conf);             // the same seed on every worker
            net.init();
            DistributedTrainer trainer = DistributedTrainer.builder(net, transport)
                    .strategy(ParallelStrategy.sequence("ring", 4).withZero(ZeroStage.GRADIENTS))
                    .build();
            trainer.fit(iterator);
        }
        // end snippet
    }

    private static void training(MultiLayerConfiguration conf, DataSetIterator iterator, Path checkpointDir)
            throws Exception {
        // snippet: training
        MultiLayerNetwork net = new MultiLayerNetwork(conf);      // the same configuration as for one process
        net.init();                                              // same seed on every worker: identical replicas
        try (AeronTransport transport = AeronTransport.fromEnvironment()) {   // rank and peers from the launcher
            DistributedTrainer trainer = DistributedTrainer.builder(net, transport)
                    .strategy(ParallelStrategy.sequence("ring", 2)   // 2 workers per sequence
                            .withDataParallel(2)                                   // x 2 data-parallel groups = 4
                            .withZero(ZeroStage.GRADIENTS))
                    .checkpoints(checkpointDir, 20).run("gpt-small").resume(true)
                    .listeners(new ScoreIterationListener(10))
                    .build();
            trainer.fit(iterator);                                // every worker iterates the same batches
        }
        // end snippet
    }

    private static void collectives() throws Exception {
        INDArray gradient = Nd4j.rand(DataType.FLOAT, 64);
        INDArray kv = Nd4j.rand(DataType.FLOAT, 2, 8);
        // snippet: collectives
        try (AeronTransport transport = AeronTransport.fromEnvironment()) {
            Communicator world = Communicator.world(transport);
            INDArray sum = world.allReduce(gradient);                       // blocking
            CollectiveHandle<INDArray> next = world.sendRecvAsync(           // double buffering: start the exchange,
                    world.group().next(), kv, world.group().previous());     // work on this block, then join
            INDArray scores = kv.mmul(kv.transpose());
            kv = next.join();

            int first = transport.rank() - transport.rank() % 2;            // sub-groups: rows, columns, teams
            Group pair = Group.of(transport, first, first + 1);
            Communicator pairs = Communicator.of(transport, pair, 1);        // channel 1: runs beside the world's
            List<INDArray> both = pairs.allGather(kv);
        }
        // end snippet
    }

    /** Token batches of 2 sequences of 16, the same on every worker. */
    static DataSetIterator batches(int count) {
        List<DataSet> list = new ArrayList<>();
        for (int s = 0; s < count; s++) {
            INDArray features = Nd4j.zeros(DataType.FLOAT, 2, 1, 16);
            INDArray labels = Nd4j.zeros(DataType.FLOAT, 2, VOCAB, 16);
            for (int i = 0; i < 2; i++) {
                for (int t = 0; t < 16; t++) {
                    features.putScalar(new int[] {i, 0, t}, (3 * s + 7 * i + t) % VOCAB);
                    labels.putScalar(new int[] {i, (3 * s + 7 * i + t + 1) % VOCAB, t}, 1.0);
                }
            }
            list.add(new DataSet(features, labels));
        }
        return new ExistingDataSetIterator(list);
    }
}
