package org.attn4j.distributed.transport;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;

/** Receives against a peer's last message and its failure (or goodbye), in each order they can meet. */
class MailboxTest {

    private static final int PEER = 2;
    private static final int TAG = 7;

    @Test
    void aMessageThatArrivedBeforeThePeerLeftIsStillReceived() throws Exception {
        Mailbox box = new Mailbox(3, 4, Duration.ofSeconds(5));
        INDArray last = Nd4j.createFromArray(1.0f, 2.0f);
        box.deliver(PEER, TAG, last);
        box.failPeer(PEER, PeerFailedException.closedReason(PEER));
        assertEquals(last, box.receive(PEER, TAG).get(5, TimeUnit.SECONDS));
    }

    @Test
    void aMessageAndTheGoodbyeBehindItArrivingWhileTheReceiveIsPostedAreReceivedInThatOrder() throws Exception {
        // The peer's receiver thread delivers the last message and acts on the goodbye right behind it between the
        // receive's first look (nothing there yet) and its posting: the message is taken, not the failure.
        Mailbox box = new Mailbox(3, 4, Duration.ofSeconds(5));
        INDArray last = Nd4j.createFromArray(1.0f, 2.0f);
        box.betweenLooks = () -> {
            box.betweenLooks = null;
            box.deliver(PEER, TAG, last);
            box.failPeer(PEER, PeerFailedException.closedReason(PEER));
        };
        INDArray into = Nd4j.create(DataType.FLOAT, 2);
        assertSame(into, box.receive(PEER, TAG, into, Runnable::run).get(5, TimeUnit.SECONDS));
        assertEquals(Nd4j.createFromArray(1.0f, 2.0f), into);
        // The next receive finds nothing more from the peer: it fails, naming the goodbye.
        ExecutionException e = assertThrows(ExecutionException.class,
                () -> box.receive(PEER, TAG).get(5, TimeUnit.SECONDS));
        PeerFailedException failure = assertInstanceOf(PeerFailedException.class, e.getCause());
        assertEquals(PEER, failure.peer());
        assertTrue(failure.peerClosed());
    }

    @Test
    void aPeerThatFailsBetweenTheLooksWithNothingSentFailsTheReceive() {
        Mailbox box = new Mailbox(3, 4, Duration.ofSeconds(5));
        box.betweenLooks = () -> {
            box.betweenLooks = null;
            box.failPeer(PEER, "its process died");
        };
        ExecutionException e = assertThrows(ExecutionException.class,
                () -> box.receive(PEER, TAG).get(5, TimeUnit.SECONDS));
        assertEquals("rank 3: peer rank 2 failed (tag 7): its process died", e.getCause().getMessage());
    }
}
