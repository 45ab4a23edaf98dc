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
import org.nd4j.shade.jackson.core.JsonProcessingException;
import org.nd4j.shade.jackson.databind.JsonNode;
import org.nd4j.shade.jackson.databind.ObjectMapper;
import org.nd4j.shade.jackson.databind.node.ArrayNode;
import org.nd4j.shade.jackson.databind.node.ObjectNode;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

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
 * each step has its own directory, and files are replaced only by rename. A committed checkpoint that is not intact
 * is passed over with its reason ({@link #scan}) and, before a resumed run could write that step again, moved
 * aside whole ({@link #setAside}).
 */
final class CheckpointStore {

    private static final Logger LOG = LoggerFactory.getLogger(CheckpointStore.class);
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Pattern MANIFEST = Pattern.compile("manifest-(\\d+)\\.json");
    private static final int FORMAT = 1;

    private final Path dir;
    private final ShardOutput output;

    CheckpointStore(Path dir) {
        this(dir, ShardOutput.WHOLE);
    }

    /** A store whose shards reach their temporary files through {@code output} (tests inject faults there). */
    CheckpointStore(Path dir, ShardOutput output) {
        this.dir = dir;
        this.output = output;
    }

    /**
     * How a shard's encoded bytes get into its temporary file before it is renamed into place. The store's own is
     * {@link #WHOLE}; the recovery test supplies one that stops part-way, as a killed worker would.
     */
    @FunctionalInterface
    interface ShardOutput {
        /** Writes every byte and forces them to the device. */
        ShardOutput WHOLE = (step, rank, bytes, file) -> {
            OutputStream out = java.nio.channels.Channels.newOutputStream(file);
            out.write(bytes);
            out.flush();
            file.force(true);
        };

        /**
         * Writes {@code bytes}, the shard of {@code rank} for checkpoint {@code step}, into {@code file} (open for
         * writing, empty); returning means the shard is complete and durable.
         */
        void write(int step, int rank, byte[] bytes, FileChannel file) throws IOException;
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

    /** A committed checkpoint passed over: its step, its manifest and why it cannot be used. */
    record Skipped(int step, Path manifest, String reason) {
    }

    /** What a look through the directory found: the newest intact checkpoint, if any, and every newer one skipped. */
    record Scan(Optional<Checkpoint> newest, List<Skipped> skipped) {
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
                StandardOpenOption.TRUNCATE_EXISTING)) {
            output.write(step, header.rank(), bytes, ch);
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
        Path tmp = dir.resolve(manifestName(step) + ".tmp");
        Path finalFile = dir.resolve(manifestName(step));
        try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                StandardOpenOption.TRUNCATE_EXISTING)) {
            ch.write(java.nio.ByteBuffer.wrap(JSON.writerWithDefaultPrettyPrinter().writeValueAsBytes(m)));
            ch.force(true);
        }
        Files.move(tmp, finalFile, StandardCopyOption.ATOMIC_MOVE);
        syncDirectory(dir);
    }

    /**
     * The newest checkpoint whose manifest and every listed shard are intact, if any. Each newer committed
     * checkpoint that is not intact is logged at WARN with why it was skipped, followed by the one used instead (or
     * that none is left).
     */
    Optional<Checkpoint> newestComplete() throws IOException {
        Scan s = scan();
        for (Skipped k : s.skipped()) {
            LOG.warn("checkpoint {} ({}) skipped: {}", k.step(), k.manifest(), k.reason());
        }
        reportInstead(s, "using", "");
        return s.newest();
    }

    /**
     * Looks through the manifests, newest step first, down to the first intact checkpoint; logs nothing. A
     * checkpoint is skipped if its manifest cannot be read or parsed, lacks a field or has one of the wrong kind,
     * names another step or format, or lists a shard that is missing or differs in size or CRC-32.
     */
    Scan scan() throws IOException {
        if (!Files.isDirectory(dir)) {
            return new Scan(Optional.empty(), List.of());
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
        List<Skipped> skipped = new ArrayList<>();
        for (int step : steps) {
            Path manifest = dir.resolve(manifestName(step));
            JsonNode json;
            try {
                json = JSON.readTree(manifest.toFile());
            } catch (JsonProcessingException e) {
                skipped.add(new Skipped(step, manifest, "its manifest is not valid JSON (" + jsonError(e) + ")"));
                continue;
            } catch (IOException e) {
                skipped.add(new Skipped(step, manifest, "its manifest cannot be read (" + e + ")"));
                continue;
            }
            String damage = manifestDamage(step, json);
            if (damage == null) {
                damage = shardDamage(json);
            }
            if (damage == null) {
                return new Scan(Optional.of(new Checkpoint(step, manifest, json)), List.copyOf(skipped));
            }
            skipped.add(new Skipped(step, manifest, damage));
        }
        return new Scan(Optional.empty(), List.copyOf(skipped));
    }

    /**
     * Before a run resumes from {@code s}: moves its skipped checkpoints (their step directories, then their
     * manifests) into {@code DIR/skipped-NNNNNN} (or {@code skipped-NNNNNN-2}, ... if that exists), so that the run
     * does not replace them when it reaches their steps again, and logs each at WARN with why it was skipped and where
     * it went, then the checkpoint resumed from instead (or that the run starts from the beginning). Called by one
     * worker only.
     *
     * @throws IOException if a move fails, naming what to move by hand; nothing is deleted
     */
    void setAside(Scan s) throws IOException {
        for (Skipped k : s.skipped()) {
            Path aside = dir.resolve("skipped-" + String.format(Locale.ROOT, "%06d", k.step()));
            for (int n = 2; Files.exists(aside); n++) {
                aside = dir.resolve("skipped-" + String.format(Locale.ROOT, "%06d-%d", k.step(), n));
            }
            // The shards first: should the process die in between, the manifest still names the checkpoint, which
            // the next resume skips (its shards are gone) and sets aside in turn.
            Path stepDir = dir.resolve(stepName(k.step()));
            try {
                Files.createDirectory(aside);
                if (Files.isDirectory(stepDir)) {
                    Files.move(stepDir, aside.resolve(stepDir.getFileName()), StandardCopyOption.ATOMIC_MOVE);
                }
                Files.move(k.manifest(), aside.resolve(k.manifest().getFileName()), StandardCopyOption.ATOMIC_MOVE);
                syncDirectory(aside);
                syncDirectory(dir);
            } catch (IOException e) {
                throw new IOException("checkpoint " + k.step() + " (" + k.manifest() + ") was skipped (" + k.reason()
                        + ") but could not be moved to " + aside + " (" + e + "); move " + stepDir + " and the "
                        + "manifest out of " + dir + " by hand, so this run does not write over them", e);
            }
            LOG.warn("checkpoint {} ({}) skipped: {}; moved to {}", k.step(), k.manifest(), k.reason(), aside);
        }
        reportInstead(s, "resuming from", "; the run starts from the beginning");
    }

    /** After skipped checkpoints: which one is used instead, or that none is left. */
    private void reportInstead(Scan s, String use, String noneLeft) {
        if (s.skipped().isEmpty()) {
            return;
        }
        if (s.newest().isPresent()) {
            LOG.warn("{} checkpoint {} ({}) instead", use, s.newest().get().step(), s.newest().get().manifest());
        } else {
            LOG.warn("no intact checkpoint is left in {}{}", dir, noneLeft);
        }
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

    /** Why the manifest of checkpoint {@code step} cannot be used as it stands, or null if it is well-formed. */
    private static String manifestDamage(int step, JsonNode m) {
        if (m == null || m.isMissingNode()) {
            return "its manifest is empty";
        }
        if (!m.isObject()) {
            return "its manifest is a JSON " + m.getNodeType() + ", expected an object";
        }
        // The format first: a manifest of another format may well lack the fields this one has.
        if (m.path("format").isIntegralNumber() && m.get("format").asInt() != FORMAT) {
            return "its manifest is format " + m.get("format") + "; this build reads " + FORMAT;
        }
        for (String name : new String[] {"format", "step", "worldSize", "zeroStage", "iteration"}) {
            if (!m.path(name).isIntegralNumber()) {
                return "its manifest's \"" + name + "\" is " + describe(m.get(name)) + ", expected an integer";
            }
        }
        for (String name : new String[] {"run", "fingerprint"}) {
            if (!m.path(name).isTextual()) {
                return "its manifest's \"" + name + "\" is " + describe(m.get(name)) + ", expected text";
            }
        }
        if (m.get("step").asInt() != step) {
            return "its manifest says step " + m.get("step");
        }
        JsonNode shards = m.path("shards");
        int w = m.get("worldSize").asInt();
        if (!shards.isArray()) {
            return "its manifest's \"shards\" is " + describe(m.get("shards")) + ", expected a list";
        }
        if (shards.size() != w) {
            return "its manifest lists " + shards.size() + (shards.size() == 1 ? " shard" : " shards")
                    + " for a world size of " + w;
        }
        for (int r = 0; r < w; r++) {
            JsonNode s = shards.get(r);
            for (String name : new String[] {"rank", "bytes", "crc32"}) {
                if (!s.path(name).isIntegralNumber()) {
                    return "its manifest's shard " + r + " has \"" + name + "\" " + describe(s.get(name))
                            + ", expected an integer";
                }
            }
            if (!s.path("file").isTextual()) {
                return "its manifest's shard " + r + " has \"file\" " + describe(s.get("file")) + ", expected text";
            }
            if (s.get("rank").asInt() != r) {
                return "its manifest's shard " + r + " says rank " + s.get("rank");
            }
        }
        return null;
    }

    /** A JSON value as a message shows it: missing, or its text, shortened. */
    private static String describe(JsonNode value) {
        if (value == null) {
            return "missing";
        }
        String text = value.toString();
        return text.length() <= 40 ? text : text.substring(0, 37) + "...";
    }

    /** Why a shard listed by a well-formed manifest does not match it, or null if every one does. */
    private String shardDamage(JsonNode manifest) {
        for (JsonNode s : manifest.get("shards")) {
            String name = s.get("file").asText();
            Path f = dir.resolve(name);
            try {
                if (!Files.isRegularFile(f)) {
                    return "shard " + name + " is missing";
                }
                long size = Files.size(f);
                if (size != s.get("bytes").asLong()) {
                    return "shard " + name + " has " + size + " bytes, its manifest says " + s.get("bytes").asLong();
                }
                CRC32 crc = new CRC32();
                try (InputStream in = new CheckedInputStream(Files.newInputStream(f), crc)) {
                    in.transferTo(OutputStream.nullOutputStream());
                }
                if (crc.getValue() != s.get("crc32").asLong()) {
                    return "shard " + name + " has CRC-32 " + crc.getValue() + ", its manifest says "
                            + s.get("crc32").asLong();
                }
            } catch (IOException e) {
                return "shard " + name + " cannot be read (" + e + ")";
            }
        }
        return null;
    }

    /** Jackson's complaint on one line, with where in the file. */
    private static String jsonError(JsonProcessingException e) {
        String what = e.getOriginalMessage() == null ? e.getClass().getSimpleName()
                : e.getOriginalMessage().lines().findFirst().orElse("");
        return e.getLocation() == null ? what
                : what + " at line " + e.getLocation().getLineNr() + ", column " + e.getLocation().getColumnNr();
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

    private static String manifestName(int step) {
        return String.format(Locale.ROOT, "manifest-%06d.json", step);
    }

    private static String stepName(int step) {
        return String.format(Locale.ROOT, "step-%06d", step);
    }

    private static void syncDirectory(Path d) throws IOException {
        try (FileChannel ch = FileChannel.open(d, StandardOpenOption.READ)) {
            ch.force(true);
        }
    }

    @Override
    public String toString() {
        return "CheckpointStore{" + dir + "}";
    }
}
