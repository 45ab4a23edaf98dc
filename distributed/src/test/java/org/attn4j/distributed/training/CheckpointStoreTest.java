package org.attn4j.distributed.training;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.stream.Stream;
import java.util.zip.CRC32;

import org.attn4j.distributed.testing.StandardError;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.shade.jackson.databind.ObjectMapper;
import org.nd4j.shade.jackson.databind.node.ArrayNode;
import org.nd4j.shade.jackson.databind.node.ObjectNode;

/**
 * A committed checkpoint that is not intact (its manifest unreadable, not JSON, missing or mistyped fields, another
 * step or format; a listed shard missing, short or with another CRC-32) is skipped with its reason on one line, the
 * newest intact one is used instead and both are logged; reading changes nothing on disk, and a resume moves the
 * skipped checkpoint aside byte for byte instead of letting the run write over it.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class CheckpointStoreTest {

    private static final int W = 2;
    private static final ObjectMapper JSON = new ObjectMapper();
    private static TrainableNetwork net;

    @TempDir
    Path dir;

    @BeforeAll
    static void network() {
        Nd4j.setDefaultDataTypes(DataType.DOUBLE, DataType.DOUBLE);
        net = TrainableNetwork.of(TrainingFixtures.gpt(DataType.DOUBLE, false, 2, 1));
    }

    /** Damages checkpoint 15 in {@code dir}; returns how the skip's reason must begin. */
    @FunctionalInterface
    interface Damage {
        String apply(Path dir) throws Exception;
    }

    static Stream<Arguments> damages() {
        return Stream.of(
            Arguments.of("manifest cut in half", (Damage) d -> {
                byte[] m = Files.readAllBytes(manifest(d, 15));
                Files.write(manifest(d, 15), java.util.Arrays.copyOf(m, m.length / 2));
                return "its manifest is not valid JSON (Unexpected end-of-input";
            }),
            Arguments.of("manifest empty", (Damage) d -> {
                Files.write(manifest(d, 15), new byte[0]);
                return "its manifest is empty";
            }),
            Arguments.of("manifest not JSON", (Damage) d -> {
                Files.writeString(manifest(d, 15), "manifest\n");
                return "its manifest is not valid JSON (Unrecognized token 'manifest'";
            }),
            Arguments.of("manifest a list", (Damage) d -> {
                Files.writeString(manifest(d, 15), "[1, 2]");
                return "its manifest is a JSON ARRAY, expected an object";
            }),
            Arguments.of("manifest a directory", (Damage) d -> {
                Files.delete(manifest(d, 15));
                Files.createDirectory(manifest(d, 15));
                return "its manifest cannot be read (";
            }),
            Arguments.of("fingerprint missing", (Damage) d -> {
                edit(d, m -> m.remove("fingerprint"));
                return "its manifest's \"fingerprint\" is missing, expected text";
            }),
            Arguments.of("world size as text", (Damage) d -> {
                edit(d, m -> m.put("worldSize", "2"));
                return "its manifest's \"worldSize\" is \"2\", expected an integer";
            }),
            Arguments.of("another format", (Damage) d -> {
                edit(d, m -> m.put("format", 2));
                return "its manifest is format 2; this build reads 1";
            }),
            Arguments.of("another step", (Damage) d -> {
                edit(d, m -> m.put("step", 10));
                return "its manifest says step 10";
            }),
            Arguments.of("a shard entry dropped", (Damage) d -> {
                edit(d, m -> ((ArrayNode) m.get("shards")).remove(1));
                return "its manifest lists 1 shard for a world size of 2";
            }),
            Arguments.of("a shard entry without its CRC", (Damage) d -> {
                edit(d, m -> ((ObjectNode) m.get("shards").get(1)).remove("crc32"));
                return "its manifest's shard 1 has \"crc32\" missing, expected an integer";
            }),
            Arguments.of("a shard missing", (Damage) d -> {
                Files.delete(shard(d, 15, 1));
                return "shard step-000015/rank-1.shard is missing";
            }),
            Arguments.of("a shard cut short", (Damage) d -> {
                byte[] s = Files.readAllBytes(shard(d, 15, 1));
                Files.write(shard(d, 15, 1), java.util.Arrays.copyOf(s, s.length - 1));
                return "shard step-000015/rank-1.shard has " + (s.length - 1) + " bytes, its manifest says "
                        + s.length;
            }),
            Arguments.of("a shard byte changed", (Damage) d -> {
                byte[] s = Files.readAllBytes(shard(d, 15, 1));
                long before = crc(s);
                s[s.length / 2] ^= 0x10;
                Files.write(shard(d, 15, 1), s);
                return "shard step-000015/rank-1.shard has CRC-32 " + crc(s) + ", its manifest says " + before;
            }));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("damages")
    void aDamagedCheckpointIsSkippedWithItsReasonAndTheNewestIntactOneUsed(String name, Damage damage)
            throws Exception {
        CheckpointStore store = new CheckpointStore(dir);
        for (int step : new int[] {5, 10, 15}) {
            commit(store, step);
        }
        String reason = damage.apply(dir);
        Map<Path, byte[]> before = files(dir);

        CheckpointStore.Scan scan = store.scan();
        assertEquals(10, scan.newest().orElseThrow().step());
        assertEquals(1, scan.skipped().size(), scan.skipped().toString());
        CheckpointStore.Skipped k = scan.skipped().get(0);
        assertEquals(15, k.step());
        assertEquals(manifest(dir, 15), k.manifest());
        assertTrue(k.reason().startsWith(reason), k.reason());
        assertEquals(1, k.reason().lines().count(), "one line: " + k.reason());

        List<String> log = StandardError.linesOf(() -> assertEquals(10, store.newestComplete().orElseThrow().step()));
        assertEquals(1, count(log, "CheckpointStore - checkpoint 15 (" + manifest(dir, 15) + ") skipped: " + reason),
                String.join("\n", log));
        assertEquals(1, count(log, "CheckpointStore - using checkpoint 10 (" + manifest(dir, 10) + ") instead"),
                String.join("\n", log));
        assertEquals(2, log.size(), String.join("\n", log));
        assertSameFiles(before, files(dir));
    }

    @Test
    void skipsDamagedCheckpointsNewestFirstAndLooksNoFurtherThanTheNewestIntact() throws Exception {
        CheckpointStore store = new CheckpointStore(dir);
        for (int step : new int[] {5, 10, 15, 20}) {
            commit(store, step);
        }
        Files.write(manifest(dir, 20), new byte[0]);
        Files.delete(shard(dir, 15, 0));
        Files.write(manifest(dir, 5), new byte[0]);

        CheckpointStore.Scan scan = store.scan();
        assertEquals(10, scan.newest().orElseThrow().step());
        assertEquals(List.of(20, 15), scan.skipped().stream().map(CheckpointStore.Skipped::step).toList());
        assertEquals(List.of("its manifest is empty", "shard step-000015/rank-0.shard is missing"),
                scan.skipped().stream().map(CheckpointStore.Skipped::reason).toList());
    }

    @Test
    void saysSoWhenNoIntactCheckpointIsLeft() throws Exception {
        CheckpointStore store = new CheckpointStore(dir);
        commit(store, 5);
        Files.write(shard(dir, 5, 0), new byte[] {1, 2, 3});

        List<String> log = StandardError.linesOf(() -> assertTrue(store.newestComplete().isEmpty()));
        assertEquals(1, count(log, "CheckpointStore - checkpoint 5 (" + manifest(dir, 5) + ") skipped: shard "
                + "step-000005/rank-0.shard has 3 bytes, its manifest says "), String.join("\n", log));
        assertTrue(log.get(log.size() - 1).endsWith("CheckpointStore - no intact checkpoint is left in " + dir),
                String.join("\n", log));
    }

    @Test
    void settingASkippedCheckpointAsideKeepsEveryByteAndFreesItsStep() throws Exception {
        CheckpointStore store = new CheckpointStore(dir);
        commit(store, 5);
        commit(store, 10);
        byte[] m = Files.readAllBytes(manifest(dir, 10));
        Files.write(manifest(dir, 10), java.util.Arrays.copyOf(m, m.length - 3));
        Map<Path, byte[]> damaged = files(dir.resolve("step-000010"));
        damaged.put(manifest(dir, 10).getFileName(), Files.readAllBytes(manifest(dir, 10)));

        List<String> log = StandardError.linesOf(() -> store.setAside(store.scan()));
        Path aside = dir.resolve("skipped-000010");
        assertEquals(1, log.stream().filter(l -> l.contains("CheckpointStore - checkpoint 10 (" + manifest(dir, 10)
                + ") skipped: its manifest is not valid JSON (") && l.endsWith("; moved to " + aside)).count(),
                String.join("\n", log));
        assertEquals(1, count(log, "CheckpointStore - resuming from checkpoint 5 (" + manifest(dir, 5) + ") instead"),
                String.join("\n", log));
        assertFalse(Files.exists(manifest(dir, 10)));
        assertFalse(Files.exists(dir.resolve("step-000010")));
        Map<Path, byte[]> moved = files(aside.resolve("step-000010"));
        moved.put(manifest(dir, 10).getFileName(), Files.readAllBytes(aside.resolve("manifest-000010.json")));
        assertSameFiles(damaged, moved);
        CheckpointStore.Scan after = store.scan();
        assertEquals(5, after.newest().orElseThrow().step());
        assertTrue(after.skipped().isEmpty(), after.skipped().toString());

        // The resumed run writes step 10 again; damaged once more, it goes beside the first one.
        commit(store, 10);
        Files.write(manifest(dir, 10), new byte[0]);
        store.setAside(store.scan());
        assertTrue(Files.exists(dir.resolve("skipped-000010-2").resolve("manifest-000010.json")));
        assertTrue(Files.exists(dir.resolve("skipped-000010-2").resolve("step-000010").resolve("rank-1.shard")));
        assertArrayEquals(damaged.get(manifest(dir, 10).getFileName()),
                Files.readAllBytes(aside.resolve("manifest-000010.json")));
    }

    @Test
    void aShardGoesInPlaceOnlyWhenItsOutputReturns() throws Exception {
        CheckpointStore store = new CheckpointStore(dir, (step, rank, bytes, file) -> {
            file.write(ByteBuffer.wrap(bytes, 0, bytes.length / 2));
            throw new IOException("no space left on device");
        });
        IOException e = assertThrows(IOException.class, () -> store.writeShard(5, header(5, 0), arrays(5, 0)));
        assertEquals("no space left on device", e.getMessage());
        assertFalse(Files.exists(shard(dir, 5, 0)));
        assertTrue(Files.size(dir.resolve("step-000005").resolve("rank-0.shard.tmp")) > 0);
        assertTrue(store.scan().newest().isEmpty());
    }

    /** Checkpoint {@code step} of a 2-worker run: each rank a small seeded array, then the manifest. */
    private static void commit(CheckpointStore store, int step) throws IOException {
        long[][] shards = new long[W][];
        for (int r = 0; r < W; r++) {
            shards[r] = store.writeShard(step, header(step, r), arrays(step, r));
        }
        store.commit(step, header(step, 0), shards, net);
    }

    private static CheckpointStore.Header header(int step, int rank) {
        return new CheckpointStore.Header("run", "fingerprint", W, 1, rank, 3L * rank, 3L * rank + 3, step, 0, step,
                11, step);
    }

    private static List<INDArray> arrays(int step, int rank) {
        Nd4j.getRandom().setSeed(100L * step + rank);
        return List.of(Nd4j.rand(DataType.DOUBLE, 3), Nd4j.rand(DataType.DOUBLE, 3));
    }

    private static Path manifest(Path dir, int step) {
        return dir.resolve(String.format(java.util.Locale.ROOT, "manifest-%06d.json", step));
    }

    private static Path shard(Path dir, int step, int rank) {
        return dir.resolve(String.format(java.util.Locale.ROOT, "step-%06d", step)).resolve("rank-" + rank + ".shard");
    }

    private static void edit(Path dir, Consumer<ObjectNode> change) throws IOException {
        ObjectNode m = (ObjectNode) JSON.readTree(manifest(dir, 15).toFile());
        change.accept(m);
        Files.write(manifest(dir, 15), JSON.writeValueAsBytes(m));
    }

    private static long crc(byte[] bytes) {
        CRC32 c = new CRC32();
        c.update(bytes);
        return c.getValue();
    }

    private static long count(List<String> lines, String text) {
        return lines.stream().filter(l -> l.contains(text)).count();
    }

    /** Every regular file under {@code root}, by path relative to it, with its bytes. */
    private static Map<Path, byte[]> files(Path root) throws IOException {
        Map<Path, byte[]> out = new TreeMap<>();
        try (Stream<Path> walk = Files.walk(root)) {
            for (Path p : walk.filter(Files::isRegularFile).toList()) {
                out.put(root.relativize(p), Files.readAllBytes(p));
            }
        }
        return out;
    }

    private static void assertSameFiles(Map<Path, byte[]> expected, Map<Path, byte[]> actual) {
        assertEquals(new ArrayList<>(expected.keySet()), new ArrayList<>(actual.keySet()));
        for (Map.Entry<Path, byte[]> e : expected.entrySet()) {
            assertArrayEquals(e.getValue(), actual.get(e.getKey()), e.getKey().toString());
        }
    }
}
