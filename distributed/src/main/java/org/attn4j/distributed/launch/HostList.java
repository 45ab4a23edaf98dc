package org.attn4j.distributed.launch;

import java.util.ArrayList;
import java.util.List;

/**
 * Slurm's compressed host lists ({@code SLURM_JOB_NODELIST}), expanded: {@code node[01-04,07],gpu3} is
 * {@code node01, node02, node03, node04, node07, gpu3}. A range keeps the zero padding of its first bound; several
 * bracket groups in one name ({@code rack[1-2]-n[1-2]}) expand to every combination, in order.
 */
public final class HostList {

    private HostList() {
    }

    /**
     * The host names of {@code list}, in order.
     *
     * @throws IllegalArgumentException naming the list and what is wrong with it
     */
    public static List<String> expand(String list) {
        if (list == null || list.isBlank()) {
            throw new IllegalArgumentException("host list: expected names such as node[01-04,07],gpu3, got an empty "
                    + "value");
        }
        List<String> hosts = new ArrayList<>();
        for (String item : splitOutsideBrackets(list.strip(), list)) {
            expandItem(item, list, "", hosts);
        }
        return hosts;
    }

    private static List<String> splitOutsideBrackets(String s, String list) {
        List<String> items = new ArrayList<>();
        int depth = 0;
        int start = 0;
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '[') {
                depth++;
            } else if (c == ']') {
                depth--;
            }
            if (depth < 0 || depth > 1) {
                throw bad(list, "brackets do not pair up");
            }
            if (c == ',' && depth == 0) {
                items.add(s.substring(start, i).strip());
                start = i + 1;
            }
        }
        if (depth != 0) {
            throw bad(list, "a '[' is never closed");
        }
        items.add(s.substring(start).strip());
        for (String item : items) {
            if (item.isEmpty()) {
                throw bad(list, "an empty name between commas");
            }
        }
        return items;
    }

    /** Appends {@code done + item} with its first bracket group expanded, recursively. */
    private static void expandItem(String item, String list, String done, List<String> hosts) {
        int open = item.indexOf('[');
        if (open < 0) {
            hosts.add(done + item);
            return;
        }
        int close = item.indexOf(']', open);
        String prefix = done + item.substring(0, open);
        String rest = item.substring(close + 1);
        for (String range : item.substring(open + 1, close).split(",", -1)) {
            String r = range.strip();
            int dash = r.indexOf('-');
            String from = dash < 0 ? r : r.substring(0, dash);
            String to = dash < 0 ? r : r.substring(dash + 1);
            if (!from.matches("[0-9]{1,9}") || !to.matches("[0-9]{1,9}")) {
                throw bad(list, "expected numbers or ranges such as 01-04 inside brackets, got \"" + r + "\"");
            }
            int a = Integer.parseInt(from);
            int b = Integer.parseInt(to);
            if (b < a) {
                throw bad(list, "the range " + r + " runs backwards");
            }
            String format = "%0" + from.length() + "d";
            for (int n = a; n <= b; n++) {
                expandItem(rest, list, prefix + String.format(java.util.Locale.ROOT, format, n), hosts);
            }
        }
    }

    private static IllegalArgumentException bad(String list, String what) {
        return new IllegalArgumentException("host list \"" + list + "\": " + what);
    }
}
