package org.attn4j.distributed.sequence;

import java.util.List;

import org.attn4j.distributed.collective.Communicator;
import org.attn4j.ops.Documents;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/**
 * The members of a sequence group must mask with the same documents: each holds the whole table by global
 * position and looks up the ids of whatever positions it meets, so a member with other ids would silently compute
 * another attention. One all-gather of a digest per batch finds it.
 */
public final class DocumentAgreement {

    private DocumentAgreement() {
    }

    /**
     * Checks that every member of {@code comm}'s group passes equal documents (or none); every member calls it.
     *
     * @throws IllegalArgumentException on every member alike, naming the first member whose ids differ from the
     *                                  first member's
     */
    public static void require(Communicator comm, Documents documents) {
        require(comm, documents, comm.group().size());
    }

    /**
     * As {@link #require(Communicator, Documents)}, where only members in the same block of {@code blockSize}
     * consecutive members must agree (the sequence groups of a job whose data-parallel groups train on different
     * examples); every member still takes part in the one all-gather.
     */
    public static void require(Communicator comm, Documents documents, int blockSize) {
        long f = documents == null ? 0 : documents.fingerprint();
        INDArray mine = Nd4j.createFromArray((double) (f >>> 32), (double) (f & 0xffffffffL),
                documents == null ? 0.0 : 1.0, documents == null ? 0.0 : documents.batch(),
                documents == null ? 0.0 : documents.length());
        List<INDArray> all = comm.allGather(mine);
        for (int i = 0; i < all.size(); i++) {
            int first = i / blockSize * blockSize;
            if (!all.get(i).equals(all.get(first))) {
                throw new IllegalArgumentException("document ids differ between workers: rank "
                        + comm.group().rank(i) + " has " + describe(all.get(i)) + ", rank " + comm.group().rank(first)
                        + " has " + describe(all.get(first)) + "; expected every worker of the sequence group to pass "
                        + "the same ids for the whole sequence");
            }
        }
    }

    private static String describe(INDArray digest) {
        return digest.getDouble(2) == 0 ? "none" : "[" + digest.getLong(3) + ", " + digest.getLong(4) + "] ids "
                + String.format("%08x%08x", digest.getLong(0), digest.getLong(1));
    }
}
