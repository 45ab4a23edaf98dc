package org.attn4j.samples;

import java.util.Locale;

/** Byte sizes as options take them: a number with an optional k, m or g (powers of 1024), e.g. 1536m or 2g. */
public final class Sizes {

    private Sizes() {
    }

    /**
     * The bytes of {@code text}.
     *
     * @param option the option's name, for the message
     * @throws UserInputException naming the option, what was expected and what came
     */
    public static long parse(String option, String text) {
        String t = text == null ? "" : text.strip().toLowerCase(Locale.ROOT);
        if (!t.matches("[0-9]{1,12}[kmg]?")) {
            throw new UserInputException(option + " must be a size such as 1536m or 2g, got '" + text + "'");
        }
        char unit = t.charAt(t.length() - 1);
        int shift = switch (unit) {
            case 'k' -> 10;
            case 'm' -> 20;
            case 'g' -> 30;
            default -> 0;
        };
        long number = Long.parseLong(shift == 0 ? t : t.substring(0, t.length() - 1));
        if (number == 0) {
            throw new UserInputException(option + " must be more than 0, got '" + text + "'");
        }
        return number << shift;
    }
}
