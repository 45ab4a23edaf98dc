package org.attn4j.distributed.collective;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Group validation, ring neighbours and the tag layout. */
@Timeout(value = 10, unit = TimeUnit.SECONDS)
class GroupTest {

    @Test
    void findsThisRanksIndexAndRingNeighbours() {
        Group g = Group.of(4, 3, 1, 3);
        assertEquals(2, g.size());
        assertEquals(1, g.index());
        assertEquals(0, g.next());
        assertEquals(0, g.previous());
        assertEquals(1, g.rank(0));
        assertArrayEquals(new int[] {1, 3}, g.ranks());
        Group solo = Group.of(1, 0, 0);
        assertEquals(0, solo.next());
        assertEquals(0, solo.previous());
    }

    @Test
    void refusesEmptyRepeatedForeignAndOutsideRanks() {
        assertMessage(() -> Group.of(4, 0), "at least one rank");
        assertMessage(() -> Group.of(4, 0, 0, 1, 0), "rank 0 is listed twice");
        assertMessage(() -> Group.of(4, 2, 0, 1), "this rank 2 is not a member");
        assertMessage(() -> Group.of(4, 0, 0, 4), "rank 4 is outside the world [0, 4)");
        assertMessage(() -> Group.of(4, 0, 0, 1).rank(2), "got 2");
    }

    @Test
    void collectiveTagsStayAboveUserTagsAndNeverRepeatWithinAWindow() {
        Set<Integer> seen = new HashSet<>();
        for (int channel : new int[] {0, 1, CollectiveTags.CHANNELS - 1}) {
            for (long call = 0; call < CollectiveTags.WINDOW; call++) {
                for (int phase = 0; phase < CollectiveTags.PHASES; phase++) {
                    int tag = CollectiveTags.tag(channel, call, phase);
                    assertTrue(tag >= CollectiveTags.USER_TAG_LIMIT && tag >= CollectiveTags.first(channel)
                            && tag <= CollectiveTags.last(channel), "tag " + tag);
                    assertTrue(seen.add(tag), "tag " + tag + " used twice");
                }
            }
        }
        assertEquals(CollectiveTags.tag(5, 3, 1), CollectiveTags.tag(5, 3 + CollectiveTags.WINDOW, 1));
        assertTrue(CollectiveTags.last(CollectiveTags.CHANNELS - 1) > 0, "no int overflow");
        assertTrue(CollectiveTags.NOTICE_TAG > CollectiveTags.last(CollectiveTags.CHANNELS - 1));
    }

    private static void assertMessage(Runnable r, String part) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, r::run);
        assertTrue(e.getMessage().contains(part), e.getMessage());
    }
}
