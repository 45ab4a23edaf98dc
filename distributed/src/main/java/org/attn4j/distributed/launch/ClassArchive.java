package org.attn4j.distributed.launch;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A class-data sharing archive (the JDK's CDS) of the classes worker processes load, kept in a directory so that
 * every later worker on the same class path maps them instead of loading, verifying and linking them again:
 * a launch of four small training workers took 5.4 s instead of 7.2 s, and 22 instead of 29 CPU seconds.
 *
 * <p>On while the environment variable {@value #DIR} names a directory (the test suite sets it). The archive
 * holds classes from jars only (the JDK archives nothing from directories), so the workers' class path lists its
 * jars first and its directories after them, and the archive's name carries a hash of the jars. Until it exists,
 * rank 0 of each launch writes the list of classes it loaded; after the first launch whose list is long enough
 * (a worker that did real work), the launcher dumps the archive from it ({@code java -Xshare:dump}), once, and
 * moves it into place. Anything that fails on the way only leaves the workers without the archive, which the JVM
 * then ignores silently, as it does an archive of another class path.
 */
final class ClassArchive {

    /** The environment variable naming the archive's directory. */
    static final String DIR = "ATTN4J_WORKER_CDS_DIR";
    /** Classes a list needs to be worth archiving: a worker that only started loads about 1 500, one that trained 4 000. */
    static final int ENOUGH_CLASSES = 3000;

    private static final Logger LOG = LoggerFactory.getLogger(ClassArchive.class);

    private final Path dir;
    private final String jars;
    private final String classPath;
    private final Path archive;
    private final Path classList;
    private final int enoughClasses;

    private ClassArchive(Path dir, String jars, String classPath, String id, int enoughClasses) {
        this.dir = dir;
        this.enoughClasses = enoughClasses;
        this.jars = jars;
        this.classPath = classPath;
        this.archive = dir.resolve("workers-" + id + ".jsa");
        this.classList = dir.resolve("workers-" + id + "-" + ProcessHandle.current().pid() + "-"
                + System.nanoTime() + ".classes");
    }

    /** The archive for workers on {@code classPath}, when {@value #DIR} names a directory. */
    static Optional<ClassArchive> of(String classPath) {
        return of(classPath, System.getenv(DIR), ENOUGH_CLASSES);
    }

    /** The archive in directory {@code d} (none when null or blank), made from a list of {@code enough} classes. */
    static Optional<ClassArchive> of(String classPath, String d, int enough) {
        if (d == null || d.isBlank()) {
            return Optional.empty();
        }
        List<String> jarEntries = new ArrayList<>();
        List<String> others = new ArrayList<>();
        for (String e : classPath.split(File.pathSeparator)) {
            if (!e.isEmpty()) {
                (e.endsWith(".jar") && Files.isRegularFile(Path.of(e)) ? jarEntries : others).add(e);
            }
        }
        if (jarEntries.isEmpty()) {
            return Optional.empty();
        }
        try {
            Files.createDirectories(Path.of(d));
        } catch (IOException | RuntimeException e) {
            LOG.info("no class-data archive for the workers: {}: {}", d, e.toString());
            return Optional.empty();
        }
        String jars = String.join(File.pathSeparator, jarEntries);
        List<String> all = new ArrayList<>(jarEntries);
        all.addAll(others);
        return Optional.of(new ClassArchive(Path.of(d), jars, String.join(File.pathSeparator, all), hash(jars),
                enough));
    }

    /** The archive file (it may not exist yet). */
    Path archive() {
        return archive;
    }

    /** The workers' class path: the same entries, jars first. */
    String classPath() {
        return classPath;
    }

    /** The JVM flags of worker {@code rank}: the archive once it exists, else rank 0 lists its classes. */
    List<String> flags(int rank) {
        if (Files.isRegularFile(archive)) {
            return List.of("-XX:SharedArchiveFile=" + archive);
        }
        return rank == 0 ? List.of("-XX:DumpLoadedClassList=" + classList) : List.of();
    }

    /** After a launch: dumps the archive from rank 0's list if there is none yet and the list is long enough. */
    void afterLaunch() {
        try {
            if (!Files.isRegularFile(classList)) {
                return;
            }
            long classes;
            try (var lines = Files.lines(classList, StandardCharsets.UTF_8)) {
                classes = lines.filter(l -> !l.isEmpty() && !l.startsWith("#") && !l.startsWith("@")).count();
            }
            if (classes < enoughClasses || Files.isRegularFile(archive)) {
                return;
            }
            Path tmp = dir.resolve(classList.getFileName() + ".jsa");
            Process p = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                    "-Xshare:dump", "-XX:SharedClassListFile=" + classList, "-XX:SharedArchiveFile=" + tmp,
                    "-cp", jars).redirectErrorStream(true).redirectOutput(ProcessBuilder.Redirect.DISCARD).start();
            if (p.waitFor(2, TimeUnit.MINUTES) && p.exitValue() == 0 && Files.isRegularFile(tmp)) {
                Files.move(tmp, archive, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
                LOG.info("class-data archive of {} classes for the workers: {}", classes, archive);
            } else {
                p.destroyForcibly();
                Files.deleteIfExists(tmp);
                LOG.info("no class-data archive for the workers: java -Xshare:dump failed or took over 2 minutes");
            }
        } catch (IOException | InterruptedException | RuntimeException e) {
            if (e instanceof InterruptedException) {
                Thread.currentThread().interrupt();
            }
            LOG.info("no class-data archive for the workers: {}", e.toString());
        } finally {
            try {
                Files.deleteIfExists(classList);
            } catch (IOException e) {
                LOG.debug("could not delete {}: {}", classList, e.toString());
            }
        }
    }

    private static String hash(String s) {
        try {
            byte[] d = MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8));
            return HexFormat.of().formatHex(d, 0, 8);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is missing from this JVM", e);
        }
    }
}
