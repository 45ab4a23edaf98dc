package org.attn4j.distributed.transport;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;

/**
 * What travels in place of the job token: a 64-bit job id in every header and a 256-bit digest in the HELLO. The
 * token itself never leaves the process. Two digests with different prefixes, so the job id (visible in every
 * packet) says nothing about the HELLO digest.
 *
 * <p>This keeps other jobs, stale workers and processes that do not know the token from injecting data; it is not
 * protection against an attacker who can read the traffic (the digest can be replayed). Run jobs on a private
 * network, bound to loopback unless told otherwise.
 */
final class JobToken {

    /** Bytes of the HELLO digest. */
    static final int DIGEST_LENGTH = 32;

    private final long jobId;
    private final byte[] helloDigest;

    /** @throws IllegalArgumentException if the token is null or blank */
    JobToken(String token) {
        if (token == null || token.isBlank()) {
            throw new IllegalArgumentException("JobToken: the job token is empty; every rank of a job needs the"
                    + " same non-empty token");
        }
        this.jobId = ByteBuffer.wrap(sha256("attn4j-job-id\0" + token)).getLong();
        this.helloDigest = sha256("attn4j-hello\0" + token);
    }

    /** The job id carried in every header. */
    long jobId() {
        return jobId;
    }

    /** A copy of the digest carried in the HELLO. */
    byte[] helloDigest() {
        return helloDigest.clone();
    }

    /** Whether {@code digest} (32 bytes) equals this token's HELLO digest, in constant time. */
    boolean matches(byte[] digest) {
        return MessageDigest.isEqual(helloDigest, digest);
    }

    /** The job id in hex: safe to log. */
    @Override
    public String toString() {
        return String.format("%016x", jobId);
    }

    private static byte[] sha256(String s) {
        try {
            return MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("JobToken: SHA-256 is missing from this JVM", e);
        }
    }
}
