package org.attn4j.distributed.transport;

import java.io.File;
import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.file.Files;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import java.util.function.Supplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import io.aeron.AeronCounters;
import io.aeron.CommonContext;
import io.aeron.driver.MediaDriver;
import org.agrona.CloseHelper;
import org.agrona.IoUtil;
import org.agrona.concurrent.status.CountersReader;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The one media driver of a job on a host, shared by every rank there (the transports of this JVM and of other
 * processes): same-host peers exchange messages through its shared-memory IPC logs. Its directory is named after
 * the job and the host; the first process to get there launches it (a lock file beside the directory decides),
 * the others connect to it. Within a JVM it is counted; once the launching process no longer uses it, it stays up
 * for the other processes' ranks and closes when none of them is connected ({@link #release}).
 */
final class HostDriver {

    private static final Logger LOG = LoggerFactory.getLogger(HostDriver.class);
    /** Host driver directories: attn4j-JOB-hostHASH. */
    static final Pattern DIRECTORY = Pattern.compile("attn4j-[0-9a-f]{16}-host[0-9a-f]{8}");
    private static final Map<String, HostDriver> OPEN = new HashMap<>();
    /** A directory not touched for this long, whose driver is not alive, belongs to a finished job. */
    private static final long STALE_MS = TimeUnit.MINUTES.toMillis(1);

    private final String directory;
    /** The driver this process launched, or null when another process runs it. */
    private final MediaDriver driver;
    private int users;
    private Thread watcher;
    private Thread exitHook;
    private boolean closed;

    private HostDriver(String directory, MediaDriver driver) {
        this.directory = directory;
        this.driver = driver;
        this.users = 1;
    }

    /** The directory clients connect to. */
    String directory() {
        return directory;
    }

    /** Whether this process runs the driver. */
    boolean owned() {
        return driver != null;
    }

    /**
     * The host driver in {@code directory}: this JVM's if it has one open, a live one another process runs, or a
     * new one launched here from {@code config}.
     *
     * @param driverTimeoutMs how old the driver's heartbeat may be for it to count as alive
     */
    static synchronized HostDriver acquire(String directory, Supplier<MediaDriver.Context> config,
                                           long driverTimeoutMs) {
        HostDriver h = OPEN.get(directory);
        if (h != null) {
            h.users++;
            return h;
        }
        File lockFile = new File(directory + ".lock");
        try (FileChannel channel = FileChannel.open(lockFile.toPath(), StandardOpenOption.CREATE,
                StandardOpenOption.WRITE); FileLock ignored = channel.lock()) {
            MediaDriver driver = null;
            // Under the lock no other process is launching a driver here: an unreadable one is dead, replace it.
            if (!driverActive(new File(directory), driverTimeoutMs, false)) {
                driver = MediaDriver.launch(config.get().aeronDirectoryName(directory).dirDeleteOnStart(true)
                        .dirDeleteOnShutdown(true));
                LOG.debug("launched the host media driver in {}", directory);
            }
            h = new HostDriver(directory, driver);
        } catch (IOException e) {
            throw new TransportException("could not lock " + lockFile + " to start the host media driver: " + e, e);
        }
        OPEN.put(directory, h);
        return h;
    }

    /**
     * Gives up one use. When this process launched the driver and no transport of it uses the driver any more,
     * the driver keeps running for the other processes' ranks and a watcher closes it (deleting its directory)
     * once none of them is connected either; a transport opened here in the meantime takes it up again. A rank
     * that finishes early thus never pulls the driver from under the others, and never waits for them either.
     * At the process's exit a driver still in use waits (at most {@code exitWait}) for the others to leave.
     */
    void release(Duration exitWait) {
        synchronized (HostDriver.class) {
            if (--users > 0) {
                return;
            }
            if (driver == null) {
                OPEN.remove(directory);
                return;
            }
            if (watcher != null) {
                return;
            }
            watcher = new Thread(this::closeWhenUnused, "attn4j-host-driver-watch");
            watcher.setDaemon(true);
            watcher.start();
            if (exitHook == null) {
                exitHook = new Thread(() -> closeAtExit(exitWait), "attn4j-host-driver-exit");
                Runtime.getRuntime().addShutdownHook(exitHook);
            }
        }
    }

    /** Closes the driver once neither this process nor any other uses it; stops if this process takes it up again. */
    private void closeWhenUnused() {
        CountersReader counters = driver.context().countersManager();
        while (true) {
            synchronized (HostDriver.class) {
                if (users > 0 || closed) {
                    watcher = null;
                    return;
                }
                if (clients(counters) == 0) {
                    OPEN.remove(directory);
                    watcher = null;
                    close();
                    return;
                }
            }
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    private void closeAtExit(Duration wait) {
        long deadline = System.nanoTime() + wait.toNanos();
        while (true) {
            synchronized (HostDriver.class) {
                // Read under the lock: the watcher may close the driver, unmapping its counters, meanwhile.
                if (closed) {
                    return;
                }
                if (clients(driver.context().countersManager()) == 0 || System.nanoTime() - deadline >= 0) {
                    close();
                    return;
                }
            }
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                synchronized (HostDriver.class) {
                    close();
                }
                return;
            }
        }
    }

    /** Closes the driver (deleting its directory) and its lock file; under the class lock. */
    private void close() {
        if (closed) {
            return;
        }
        closed = true;
        CloseHelper.quietClose(driver);
        try {
            Files.deleteIfExists(new File(directory + ".lock").toPath());
        } catch (IOException e) {
            LOG.debug("could not delete {}.lock", directory, e);
        }
        if (exitHook != null && Thread.currentThread() != exitHook) {
            try {
                Runtime.getRuntime().removeShutdownHook(exitHook);
            } catch (IllegalStateException e) {
                // the JVM is exiting already
            }
        }
    }

    private static int clients(CountersReader counters) {
        AtomicInteger n = new AtomicInteger();
        counters.forEach((value, id, label) -> {
            if (counters.getCounterTypeId(id) == AeronCounters.DRIVER_HEARTBEAT_TYPE_ID) {
                n.incrementAndGet();
            }
        });
        return n.get();
    }

    /** Deletes {@code lock} unless a live process holds a lock on it. */
    private static void deleteIfUnlocked(File lock) {
        try (FileChannel channel = FileChannel.open(lock.toPath(), StandardOpenOption.WRITE)) {
            FileLock held = channel.tryLock();
            if (held != null) {
                Files.deleteIfExists(lock.toPath());           // on Linux a lock does not keep a file from deletion
                held.release();
            }
        } catch (IOException | OverlappingFileLockException e) {
            LOG.debug("left {} in place: {}", lock, e.toString());
        }
    }

    /**
     * Whether a live driver works in {@code dir}, or {@code ifUnreadable} when its CnC file cannot be read. That
     * happens when another rank of a job starting on this host deletes the same stale directory (the file gone
     * between Aeron's check for it and its mapping of it), and when a driver died before it finished writing the
     * file (killed while starting, the directory then reused by a job run again under the same token).
     */
    private static boolean driverActive(File dir, long driverTimeoutMs, boolean ifUnreadable) {
        try {
            return CommonContext.isDriverActive(dir, driverTimeoutMs, s -> { });
        } catch (RuntimeException e) {
            LOG.info("the host driver directory {} cannot be read ({}): {}", dir, e.toString(),
                    ifUnreadable ? "left in place" : "replaced");
            return ifUnreadable;
        }
    }

    /** The lock file of a host driver directory, or of one rank in it. */
    private static final Pattern LOCK_FILE = Pattern.compile(
            "(attn4j-[0-9a-f]{16}-host[0-9a-f]{8})(\\.rank\\d+)?\\.lock");

    /**
     * Deletes host driver directories (and their lock files) of jobs that ended without closing them: not
     * modified for a minute and no live driver in them; and lock files a minute old whose directory is gone (a
     * rank killed after its job's driver had stopped could not delete its own).
     */
    static void removeStale(File root, long driverTimeoutMs) {
        long now = System.currentTimeMillis();
        File[] orphans = root.listFiles((d, name) -> {
            Matcher m = LOCK_FILE.matcher(name);
            return m.matches() && !new File(d, m.group(1)).exists();
        });
        for (File lock : orphans == null ? new File[0] : orphans) {
            if (now - lock.lastModified() > STALE_MS) {
                deleteIfUnlocked(lock);
            }
        }
        File[] dirs = root.listFiles((d, name) -> DIRECTORY.matcher(name).matches());
        if (dirs == null) {
            return;
        }
        for (File dir : dirs) {
            // Never deleted on a doubt: an unreadable one may be another rank's to delete, or a live driver's.
            if (now - dir.lastModified() > STALE_MS && !driverActive(dir, driverTimeoutMs, true)) {
                LOG.info("removing the host driver directory {} of a job that no longer runs", dir);
                IoUtil.delete(dir, true);
                File[] locks = root.listFiles((d, name) -> name.startsWith(dir.getName() + ".")
                        && name.endsWith(".lock"));
                for (File lock : locks == null ? new File[0] : locks) {
                    IoUtil.delete(lock, true);
                }
            }
        }
    }
}
