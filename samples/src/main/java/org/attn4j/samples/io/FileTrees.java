package org.attn4j.samples.io;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.Comparator;

/** Whole directory trees on disk. */
public final class FileTrees {

    private FileTrees() {
    }

    /** Deletes {@code p} and, if it is a directory, everything in it; nothing if it does not exist. */
    public static void delete(Path p) throws IOException {
        if (!Files.exists(p, LinkOption.NOFOLLOW_LINKS)) {
            return;
        }
        try (var paths = Files.walk(p)) {
            for (Path q : paths.sorted(Comparator.reverseOrder()).toList()) {
                Files.delete(q);
            }
        }
    }
}
