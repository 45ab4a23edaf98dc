package org.attn4j.spark;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.Serializable;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.time.Duration;
import java.util.List;

import org.apache.spark.BarrierTaskContext;
import org.apache.spark.BarrierTaskInfo;
import org.attn4j.distributed.collective.Communicator;
import org.attn4j.distributed.launch.FreePorts;
import org.attn4j.distributed.training.DistributedTrainer;
import org.attn4j.distributed.training.ParallelStrategy;
import org.attn4j.distributed.transport.AeronTransport;
import org.attn4j.distributed.transport.AeronTransportContext;
import org.deeplearning4j.nn.api.Model;
import org.deeplearning4j.nn.conf.ComputationGraphConfiguration;
import org.deeplearning4j.nn.conf.MultiLayerConfiguration;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.deeplearning4j.util.ModelSerializer;

import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.AbstractFunction1;

/**
 * One barrier task of a Spark run: rank = partition, an Aeron endpoint on the executor's address, the endpoints
 * exchanged with {@code allGather}, then the rank's {@link Work} with the other tasks over that transport.
 */
final class TrainingTask extends AbstractFunction1<Iterator<Integer>, Iterator<SparkSequenceParallel.TaskResult>>
        implements Serializable {

    private static final long serialVersionUID = 1L;

    /** What a rank does once the tasks have met: trains, and answers with its losses (rank 0: its model too). */
    @FunctionalInterface
    interface Work extends Serializable {
        SparkSequenceParallel.TaskResult run(AeronTransport transport, int rank, ParallelStrategy strategy);
    }

    private final SparkSequenceParallel.StrategySpec strategy;
    private final long timeoutMillis;
    private final String token;
    private final Work work;

    TrainingTask(SparkSequenceParallel.StrategySpec strategy, long timeoutMillis, String token, Work work) {
        this.strategy = strategy;
        this.timeoutMillis = timeoutMillis;
        this.token = token;
        this.work = work;
    }

    @Override
    public Iterator<SparkSequenceParallel.TaskResult> apply(Iterator<Integer> partition) {
        BarrierTaskContext ctx = BarrierTaskContext.get();
        int rank = ctx.partitionId();
        BarrierTaskInfo[] tasks = ctx.getTaskInfos();
        ParallelStrategy s = strategy.strategy();
        if (tasks.length != s.worldSize()) {
            throw new IllegalStateException("SparkSequenceParallel: the barrier stage has " + tasks.length
                    + " tasks, the strategy " + strategy + " needs " + s.worldSize());
        }
        String host = address(tasks[rank].address());
        int port = FreePorts.udp(inet(host), 1)[0];
        String[] endpoints = ctx.allGather(host + ":" + port);        // in partition order: rank order
        AeronTransportContext c = AeronTransportContext.builder().rank(rank).worldSize(tasks.length)
                .endpoints(List.of(endpoints)).bindAddress(host)
                .jobToken(token + "-" + ctx.stageAttemptNumber())      // a retried attempt meets only its own tasks
                .timeout(Duration.ofMillis(timeoutMillis))
                .transportSettings(System.getenv())                      // ATTN4J_TRANSPORT_*, as for launched workers
                .build();
        try (AeronTransport transport = new AeronTransport(c)) {
            SparkSequenceParallel.TaskResult result = work.run(transport, rank, s);
            Communicator.world(transport).barrier();      // no rank closes its transport while another receives
            return CollectionConverters.asScala(List.of(result).iterator());
        }
    }

    /** The training of a DL4J configuration ({@link SparkSequenceParallel}), the model's bytes from rank 0. */
    record NetworkWork(String configuration, boolean graph, int steps, SparkSequenceParallel.BatchSource data)
            implements Work {

        @Override
        public SparkSequenceParallel.TaskResult run(AeronTransport transport, int rank, ParallelStrategy s) {
            Model net = network();
            DistributedTrainer trainer = DistributedTrainer.builder(net, transport).strategy(s).build();
            double[] losses = new double[steps];
            int group = trainer.dataParallelIndex();
            for (int step = 0; step < steps; step++) {
                losses[step] = trainer.fitGroup(data.batch(step, group, s.dataParallel()));
            }
            return new SparkSequenceParallel.TaskResult(rank, losses, rank == 0 ? bytes(net) : null);
        }

        private Model network() {
            if (graph) {
                ComputationGraph g = new ComputationGraph(ComputationGraphConfiguration.fromJson(configuration));
                g.init();
                return g;
            }
            MultiLayerNetwork n = new MultiLayerNetwork(MultiLayerConfiguration.fromJson(configuration));
            n.init();
            return n;
        }
    }

    private static byte[] bytes(Model net) {
        try {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            ModelSerializer.writeModel(net, out, true);
            return out.toByteArray();
        } catch (IOException e) {
            throw new UncheckedIOException("SparkSequenceParallel rank 0: serialising the model failed", e);
        }
    }

    /** The host part of an executor address {@code host:port} (or {@code host}), as an IP address. */
    private static String address(String executor) {
        String host = executor.contains(":") ? executor.substring(0, executor.lastIndexOf(':')) : executor;
        return inet(host).getHostAddress();
    }

    private static InetAddress inet(String host) {
        try {
            return InetAddress.getByName(host);
        } catch (IOException e) {
            throw new UncheckedIOException("SparkSequenceParallel: executor address " + host + " does not resolve", e);
        }
    }
}
