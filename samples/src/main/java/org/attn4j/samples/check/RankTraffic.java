package org.attn4j.samples.check;

/**
 * Bytes one rank sent to other ranks during a check, as its communicator counted them.
 *
 * @param rank          the rank, {@code 0..workers-1}
 * @param forwardBytes  bytes sent during the forward pass
 * @param backwardBytes bytes sent during the backward pass
 */
public record RankTraffic(int rank, long forwardBytes, long backwardBytes) {
}
