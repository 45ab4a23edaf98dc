package org.attn4j.distributed.launch;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.junit.jupiter.api.Test;

/** Slurm's compressed host lists. */
class HostListTest {

    @Test
    void expandsRangesListsPaddingAndPlainNames() {
        assertEquals(List.of("node01", "node02", "node03", "node04", "node07", "gpu3"),
                HostList.expand("node[01-04,07],gpu3"));
        assertEquals(List.of("a", "b"), HostList.expand("a,b"));
        assertEquals(List.of("n8", "n9", "n10"), HostList.expand("n[8-10]"));
        assertEquals(List.of("n008", "n009", "n010"), HostList.expand("n[008-010]"));
        assertEquals(List.of("rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"), HostList.expand("rack[1-2]-n[1-2]"));
        assertEquals(List.of("x5.cluster"), HostList.expand("x[5].cluster"));
    }

    @Test
    void refusesMalformedListsInOneLine() {
        for (String[] c : new String[][] {{"node[01-04", "never closed"}, {"node]1[", "do not pair"},
                {"node[a-b]", "got \"a-b\""}, {"node[4-1]", "runs backwards"}, {"a,,b", "empty name"},
                {" ", "empty value"}, {"n[[1]]", "do not pair"}}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> HostList.expand(c[0]));
            assertTrue(e.getMessage().contains(c[1]), e.getMessage());
            assertTrue(!e.getMessage().contains("\n"), e.getMessage());
        }
    }
}
