package org.attn4j.samples;

import java.nio.file.Files;
import java.nio.file.Path;

/** Checks of option values shared by the commands, each failing with one line that names the option. */
public final class Options {

    private Options() {
    }

    /** {@code dir} may be written: it does not exist yet, or it is a directory. */
    public static void outputDirectory(String option, Path dir) {
        if (Files.exists(dir) && !Files.isDirectory(dir)) {
            throw new UserInputException(option + " " + dir + " exists and is not a directory");
        }
    }

    /** A Java heap size as {@code -Xmx} takes it: 512m, 2g. */
    public static void heap(String option, String value) {
        if (value == null || !value.matches("[0-9]+[kKmMgG]?") || value.matches("0+[kKmMgG]?")) {
            throw new UserInputException(option + " must be a heap size such as 512m or 2g, got '" + value + "'");
        }
    }

    /** {@code value >= min}. */
    public static void atLeast(String option, double value, double min) {
        if (!(value >= min)) {
            throw new UserInputException(option + " must be >= " + (min == Math.rint(min) ? Long.toString((long) min)
                    : Double.toString(min)) + ", got " + (value == Math.rint(value) ? Long.toString((long) value)
                    : Double.toString(value)));
        }
    }
}
