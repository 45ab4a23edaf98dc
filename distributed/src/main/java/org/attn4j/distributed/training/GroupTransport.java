package org.attn4j.distributed.training;

import java.time.Duration;
import java.util.concurrent.CompletableFuture;

import org.attn4j.distributed.collective.Group;
import org.attn4j.distributed.transport.Transport;
import org.attn4j.distributed.transport.TrafficCounter;
import org.nd4j.linalg.api.ndarray.INDArray;

/**
 * A group of a job's ranks seen as a job of its own: rank {@code i} of this view is the group's member
 * {@code i}. The sequence-parallel algorithms, written for a whole job, run on one sequence group through it.
 * Sends and receives go to the underlying transport with the same tags, so two disjoint groups never meet; the
 * view is not closed by {@link #close()} (the job's transport is), and its traffic is the job transport's.
 */
final class GroupTransport implements Transport {

    private final Transport job;
    private final Group group;

    GroupTransport(Transport job, Group group) {
        this.job = job;
        this.group = group;
    }

    @Override
    public int rank() {
        return group.index();
    }

    @Override
    public int worldSize() {
        return group.size();
    }

    @Override
    public CompletableFuture<Void> send(int peer, int tag, INDArray array) {
        return job.send(group.rank(peer), tag, array);
    }

    @Override
    public CompletableFuture<INDArray> receive(int peer, int tag) {
        return job.receive(group.rank(peer), tag);
    }

    @Override
    public TrafficCounter traffic() {
        return job.traffic();
    }

    @Override
    public Duration timeout() {
        return job.timeout();
    }

    /** Nothing: the job's transport belongs to whoever opened it. */
    @Override
    public void close() {
    }

    @Override
    public String toString() {
        return "GroupTransport{" + group + " of " + job + "}";
    }
}
