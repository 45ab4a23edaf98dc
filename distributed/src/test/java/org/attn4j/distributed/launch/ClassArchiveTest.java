package org.attn4j.distributed.launch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The workers' class-data archive: jars first on the class path, rank 0 lists its classes until the archive
 * exists, a list too short makes none, a long enough one makes it, and workers started with it run and say that
 * they map it.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ClassArchiveTest {

    @TempDir
    Path dir;

    @Test
    void jarsComeFirstAndTheArchiveIsNamedByThem() throws Exception {
        Path jar = Files.createFile(dir.resolve("a.jar"));
        Path classes = Files.createDirectories(dir.resolve("classes"));
        String cp = classes + File.pathSeparator + jar;
        ClassArchive a = ClassArchive.of(cp, dir.resolve("cds").toString(), 1).orElseThrow();
        assertEquals(jar + File.pathSeparator + classes, a.classPath());
        assertEquals(a.archive(), ClassArchive.of(jar.toString(), dir.resolve("cds").toString(), 1).orElseThrow()
                .archive(), "the same jars, the same archive");
        assertTrue(ClassArchive.of(cp, null, 1).isEmpty(), "off without a directory");
        assertTrue(ClassArchive.of(classes.toString(), dir.toString(), 1).isEmpty(), "nothing to archive");
        assertTrue(a.flags(0).get(0).startsWith("-XX:DumpLoadedClassList="), a.flags(0).toString());
        assertEquals(List.of(), a.flags(1));
    }

    @Test
    void aLongEnoughListMakesTheArchiveThatLaterWorkersMap() throws Exception {
        String cp = System.getProperty("java.class.path");
        String cds = dir.resolve("cds").toString();
        ClassArchive tooShort = ClassArchive.of(cp, cds, 1_000_000).orElseThrow();
        assertEquals(0, launch(tooShort, "hello"));
        tooShort.afterLaunch();
        assertFalse(Files.exists(tooShort.archive()), "no archive from a list shorter than asked");
        try (var left = Files.list(dir.resolve("cds"))) {
            assertEquals(0, left.count(), "the list is deleted");
        }

        ClassArchive a = ClassArchive.of(cp, cds, 100).orElseThrow();
        assertEquals(0, launch(a, "hello"));
        a.afterLaunch();
        assertTrue(Files.isRegularFile(a.archive()), "an archive from rank 0's list");
        assertEquals(List.of("-XX:SharedArchiveFile=" + a.archive()), a.flags(0));
        List<String> out = new CopyOnWriteArrayList<>();
        LaunchResult r = LocalLauncher.builder(1, LauncherProbe.class.getName()).args(List.of("flags")).heap("64m")
                .classArchiveDir(null).classPath(a.classPath()).jvmArgs(List.of(a.flags(0).get(0), "-Xshare:on"))
                .output(out::add, out::add).build().run();
        assertEquals(0, r.exitCode(), "a worker with -Xshare:on (which fails if the archive does not map): " + out);
    }

    /** A probe launch with the archive's class path and rank 0's flags (and no archive of the suite's). */
    private static int launch(ClassArchive a, String mode) throws Exception {
        return LocalLauncher.builder(1, LauncherProbe.class.getName()).args(List.of(mode)).heap("64m")
                .classArchiveDir(null).classPath(a.classPath()).jvmArgs(a.flags(0)).output(l -> { }, l -> { }).build()
                .run().exitCode();
    }
}
