package org.attn4j.distributed.transport;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;

import com.sun.jna.Function;
import com.sun.jna.Memory;
import com.sun.jna.Native;
import com.sun.jna.NativeLibrary;
import org.agrona.BufferUtil;

/**
 * Reads another process's memory with Linux's {@code process_vm_readv(2)} (cross-memory attach): the kernel copies
 * straight from the sender's pages into the receiver's, one copy where a shared-memory log takes two (into the
 * log, out of it). Open MPI's shared-memory transport moves large messages the same way.
 *
 * <p>The kernel allows the read when the reader may trace the target: the same user, and where the Yama security
 * module restricts tracing to descendants ({@code kernel.yama.ptrace_scope = 1}, common on desktop distributions),
 * a target that named any process its tracer ({@code prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY)}, which
 * {@link #allowReaders} does). A container's seccomp profile may refuse the call altogether. Whether a read of a
 * given peer works is therefore learned by trying it: {@link #read} of a few known bytes.
 */
final class ProcessMemory {

    /** {@code prctl} option: who may trace this process under Yama. */
    private static final int PR_SET_PTRACER = 0x59616d61;
    /** {@code PR_SET_PTRACER} argument: any process (of a user allowed to trace it anyway). */
    private static final long PR_SET_PTRACER_ANY = -1L;
    private static final int ESRCH = 3;

    private static final Function READV = find("process_vm_readv");
    private static final Function PRCTL = find("prctl");

    /** Test hook: every probe fails, as where the kernel refuses the reads. */
    static volatile boolean refuseProbes;

    /** Two iovecs (local, remote) for the calls of one thread. */
    private final Memory iov = new Memory(32);

    /** Whether {@code process_vm_readv} exists here (Linux with glibc); a read may still be refused. */
    static boolean available() {
        return READV != null;
    }

    /** This process's id. */
    static long pid() {
        return ProcessHandle.current().pid();
    }

    /**
     * Lets any process of a user allowed to trace this one read its memory under Yama's restricted mode; does
     * nothing where Yama is absent or stricter. Best effort: the outcome shows in the peers' probes.
     */
    static void allowReaders() {
        if (PRCTL != null) {
            try {
                PRCTL.invokeInt(new Object[] {PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0L, 0L, 0L});
            } catch (RuntimeException | UnsatisfiedLinkError e) {
                // the probes decide
            }
        }
    }

    /** The address of a direct buffer's first byte (position 0). */
    static long address(ByteBuffer direct) {
        return BufferUtil.address(direct);
    }

    /**
     * Copies {@code length} bytes at {@code remote} in process {@code pid} to {@code local} in this process. Not
     * thread-safe: one instance per thread.
     *
     * @return null when every byte was copied, else why not (with the errno), {@link #processGone} telling
     *         whether the process no longer exists
     */
    String read(long pid, long remote, long local, long length) {
        long done = 0;
        while (done < length) {
            iov.setLong(0, local + done);
            iov.setLong(8, length - done);
            iov.setLong(16, remote + done);
            iov.setLong(24, length - done);
            long n;
            try {
                n = READV.invokeLong(new Object[] {(int) pid, iov, 1L, iov.share(16), 1L, 0L});
            } catch (RuntimeException | UnsatisfiedLinkError e) {
                return "process_vm_readv failed: " + e;
            }
            if (n <= 0) {
                int errno = n < 0 ? Native.getLastError() : 0;
                return (errno == ESRCH ? GONE : "process_vm_readv returned " + n + ", errno ") + errno;
            }
            done += n;
        }
        return null;
    }

    private static final String GONE = "the process is gone, errno ";

    /** Whether a failure {@link #read} returned says the process no longer exists. */
    static boolean processGone(String failure) {
        return failure != null && failure.startsWith(GONE);
    }

    /**
     * Whether this thread can read 8 bytes holding {@code expected} at {@code remote} in {@code pid}: the probe of
     * a peer's HELLO.
     */
    boolean probe(long pid, long remote, long expected) {
        if (refuseProbes) {
            return false;
        }
        ByteBuffer b = ByteBuffer.allocateDirect(8).order(ByteOrder.nativeOrder());
        return pid > 0 && remote != 0 && read(pid, remote, address(b), 8) == null && b.getLong(0) == expected;
    }

    private static Function find(String name) {
        try {
            return NativeLibrary.getInstance("c").getFunction(name);
        } catch (UnsatisfiedLinkError | RuntimeException | NoClassDefFoundError e) {
            return null;
        }
    }
}
