package org.attn4j.distributed.training;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import java.util.zip.CRC32;
import java.util.zip.CheckedInputStream;

import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.shade.jackson.databind.JsonNode;
import org.nd4j.shade.jackson.databind.ObjectMapper;
import org.nd4j.shade.jackson.databind.node.ArrayNode;
import org.nd4j.shade.jackson.databind.node.ObjectNode;

/**
 * Sharded checkpoints on disk: every worker writes its own shard, the manifest is committed last, and a reader
 * only ever sees complete checkpoints.
 * <pre>
 *   DIR/step-000010/rank-0.shard ... rank-{W-1}.shard     each written to a .tmp, fsynced, renamed, dir fsynced
 *   DIR/manifest-000010.json                               by rank 0 after every shard is in place (the commit)
 * </pre>
 * A shard holds a JSON header ({@link Header}: run, model fingerprint, world size, ZeRO stage, rank, slice,
 * iteration, epoch, batches done in the epoch, RNG seed) and the worker's arrays (its parameter slice and the
 * optimizer state it holds). The manifest lists every shard with its size and CRC-32; a checkpoint counts only if
 * its manifest parses and every shard it lists has that size and checksum. Nothing complete is ever overwritten:
 * each step has its own directory, and files are replaced only by rename.
 */
final class CheckpointStore {

    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Pattern MANIFEST = Pattern.compile("manifest-(\\d+)\\.json");
    private static final int FORMAT = 1;
    /** Fault injection for the recovery test: {@code step:rank} kills that rank half-way through its shard. */
    static final String KILL_PROPERTY = "attn4j.test.killDuringCheckpoint";

    private final Path dir;

    CheckpointStore(Path dir) {
        this.dir = dir;
    }

    /** What a shard says about the run that wrote it. */
    record Header(String run, String fingerprint, int worldSize, int zeroStage, int rank, long sliceFrom,
                  long sliceTo, int iteration, int epoch, long batchesDone, long rngSeed, int step) {
        ObjectNode toJson() {
            ObjectNode n = JSON.createObjectNode();
            n.put("format", FORMAT).put("run", run).put("fingerprint", fingerprint).put("worldSize", worldSize)
                    .put("zeroStage", zeroStage).put("rank", rank).put("sliceFrom", sliceFrom)
                    .put("sliceTo", sliceTo).put("iteration", iteration).put("epoch", epoch)
                    .put("batchesDone", batchesDone).put("rngSeed", rngSeed).put("step", step);
            return n;
        }

        static Header of(JsonNode n) throws IOException {
            if (n.path("format").asInt() != FORMAT) {
                throw new IOException("checkpoint shard format " + n.path("format") + "; this build reads " + FORMAT);
            }
            return new Header(n.get("run").asText(), n.get("fingerprint").asText(), n.get("worldSize").asInt(),
                    n.get("zeroStage").asInt(), n.get("rank").asInt(), n.get("sliceFrom").asLong(),
                    n.get("sliceTo").asLong(), n.get("iteration").asInt(), n.get("epoch").asInt(),
                    n.get("batchesDone").asLong(), n.get("rngSeed").asLong(), n.get("step").asInt());
        }
    }

    /** A worker's shard as read back. */
    record Shard(Header header, List<INDArray> arrays) {
    }

    /** One complete checkpoint: its step and manifest. */
    record Checkpoint(int step, Path manifest, JsonNode json) {
        int worldSize() {
            return json.get("worldSize").asInt();
        }
    }

    /**
     * Writes this worker's shard of checkpoint {@code step} (temporary file, fsync, rename, directory fsync).
     *
     * @return the shard's size and CRC-32, for the manifest
     */
    long[] writeShard(int step, Header header, List<INDArray> arrays) throws IOException {
        Path stepDir = dir.resolve(stepName(step));
        Files.createDirectories(stepDir);
        Path finalFile = stepDir.resolve("rank-" + header.rank() + ".shard");
        Path tmp = stepDir.resolve("rank-" + header.rank() + ".shard.tmp");
        byte[] bytes = encode(header, arrays);
        try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                StandardOpenOption.TRUNCATE_EXISTING);
             OutputStream out = java.nio.channels.Channels.newOutputStream(ch)) {
            if (killHere(step, header.rank())) {
                out.write(bytes, 0, bytes.length / 2);
                out.flush();
                ch.force(true);
                killSelf();
            }
            out.write(bytes);
            out.flush();
            ch.force(true);
        }
        Files.move(tmp, finalFile, StandardCopyOption.ATOMIC_MOVE);
        syncDirectory(stepDir);
        CRC32 crc = new CRC32();
        crc.update(bytes);
        return new long[] {bytes.length, crc.getValue()};
    }

    /**
     * Commits checkpoint {@code step}: the manifest, written last (rank 0 only). It also holds the model's
     * configuration (kind and JSON), so a checkpoint can be consolidated into a plain DL4J model without the code
     * that built it ({@link CheckpointExport}).
     */
    void commit(int step, Header header, long[][] shards, TrainableNetwork net) throws IOException {
        ObjectNode m = JSON.createObjectNode();
        m.put("format", FORMAT).put("step", step).put("run", header.run()).put("fingerprint", header.fingerprint())
                .put("worldSize", header.worldSize()).put("zeroStage", header.zeroStage())
                .put("iteration", header.iteration()).put("epoch", header.epoch())
                .put("model", net.kind()).put("configuration", net.configurationJson());
        ArrayNode list = m.putArray("shards");
        for (int r = 0; r < shards.length; r++) {
            list.addObject().put("rank", r).put("file", stepName(step) + "/rank-" + r + ".shard")
                    .put("bytes", shards[r][0]).put("crc32", shards[r][1]);
        }
        Path tmp = dir.resolve("manifest-" + String.format(Locale.ROOT, "%06d", step) + ".json.tmp");
        Path finalFile = dir.resolve("manifest-" + String.format(Locale.ROOT, "%06d", step) + ".json");
        try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                StandardOpenOption.TRUNCATE_EXISTING)) {
            ch.write(java.nio.ByteBuffer.wrap(JSON.writerWithDefaultPrettyPrinter().writeValueAsBytes(m)));
            ch.force(true);
        }
        Files.move(tmp, finalFile, StandardCopyOption.ATOMIC_MOVE);
        syncDirectory(dir);
    }

    /** The newest checkpoint whose manifest and every listed shard are intact, if any. */
    Optional<Checkpoint> newestComplete() throws IOException {
        if (!Files.isDirectory(dir)) {
            return Optional.empty();
        }
        List<Integer> steps = new ArrayList<>();
        try (Stream<Path> files = Files.list(dir)) {
            files.forEach(p -> {
                Matcher mm = MANIFEST.matcher(p.getFileName().toString());
                if (mm.matches()) {
                    steps.add(Integer.parseInt(mm.group(1)));
                }
            });
        }
        steps.sort((a, b) -> Integer.compare(b, a));
        for (int step : steps) {
            Path manifest = dir.resolve(String.format(Locale.ROOT, "manifest-%06d.json", step));
            try {
                JsonNode json = JSON.readTree(manifest.toFile());
                if (intact(json)) {
                    return Optional.of(new Checkpoint(step, manifest, json));
                }
            } catch (IOException e) {
                // a damaged manifest: an older checkpoint may still be complete
            }
        }
        return Optional.empty();
    }

    /** Reads the shard of {@code rank} of a complete checkpoint. */
    Shard readShard(Checkpoint c, int rank) throws IOException {
        Path file = dir.resolve(c.json().get("shards").get(rank).get("file").asText());
        try (DataInputStream in = new DataInputStream(new BufferedInputStream(Files.newInputStream(file)))) {
            Header h = Header.of(JSON.readTree(in.readUTF()));
            int count = in.readInt();
            List<INDArray> arrays = new ArrayList<>(count);
            for (int i = 0; i < count; i++) {
                arrays.add(Nd4j.read(in));
            }
            return new Shard(h, arrays);
        }
    }

    private boolean intact(JsonNode manifest) throws IOException {
        for (JsonNode s : manifest.get("shards")) {
            Path f = dir.resolve(s.get("file").asText());
            if (!Files.isRegularFile(f) || Files.size(f) != s.get("bytes").asLong()) {
                return false;
            }
            CRC32 crc = new CRC32();
            try (InputStream in = new CheckedInputStream(Files.newInputStream(f), crc)) {
                in.transferTo(OutputStream.nullOutputStream());
            }
            if (crc.getValue() != s.get("crc32").asLong()) {
                return false;
            }
        }
        return true;
    }

    private static byte[] encode(Header header, List<INDArray> arrays) throws IOException {
        java.io.ByteArrayOutputStream buffer = new java.io.ByteArrayOutputStream();
        try (DataOutputStream out = new DataOutputStream(new BufferedOutputStream(buffer))) {
            out.writeUTF(JSON.writeValueAsString(header.toJson()));
            out.writeInt(arrays.size());
            for (INDArray a : arrays) {
                Nd4j.write(a, out);
            }
        }
        return buffer.toByteArray();
    }

    private static String stepName(int step) {
        return String.format(Locale.ROOT, "step-%06d", step);
    }

    private static void syncDirectory(Path d) throws IOException {
        try (FileChannel ch = FileChannel.open(d, StandardOpenOption.READ)) {
            ch.force(true);
        }
    }

    private static boolean killHere(int step, int rank) {
        String spec = System.getProperty(KILL_PROPERTY, System.getenv("ATTN4J_TEST_KILL_DURING_CHECKPOINT"));
        return spec != null && spec.equals(step + ":" + rank);
    }

    /** SIGKILL to this process (the test's dying worker), so nothing after the half-written shard runs. */
    private static void killSelf() throws IOException {
        new ProcessBuilder("kill", "-9", Long.toString(ProcessHandle.current().pid())).start();
        try {
            Thread.sleep(60_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        throw new IOException("fault injection: the kill did not arrive");
    }

    @Override
    public String toString() {
        return "CheckpointStore{" + dir + "}";
    }
}
