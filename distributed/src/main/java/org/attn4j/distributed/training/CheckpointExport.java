package org.attn4j.distributed.training;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;

import org.deeplearning4j.nn.api.Model;
import org.deeplearning4j.nn.conf.ComputationGraphConfiguration;
import org.deeplearning4j.nn.conf.MultiLayerConfiguration;
import org.deeplearning4j.nn.graph.ComputationGraph;
import org.deeplearning4j.nn.multilayer.MultiLayerNetwork;
import org.deeplearning4j.util.ModelSerializer;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.factory.Nd4j;
import org.nd4j.linalg.indexing.NDArrayIndex;
import org.nd4j.shade.jackson.databind.JsonNode;

/**
 * Consolidates a sharded checkpoint written by {@link DistributedTrainer} (any world size, any ZeRO stage) into one
 * ordinary DL4J model: the configuration stored in the manifest, the parameter slices of every shard put back in
 * rank order, the iteration and epoch counts of the checkpoint. The result loads with plain DL4J
 * ({@code ModelSerializer.restoreComputationGraph}, {@code MultiLayerNetwork.load}) and gives the outputs the
 * workers' network had at that step. The optimizer state stays in the shards (resume with the trainer to keep it);
 * the exported model carries none, as DeepSpeed's {@code zero_to_fp32} exports weights only.
 */
public final class CheckpointExport {

    private CheckpointExport() {
    }

    /** A consolidated network and the step of the checkpoint it came from. */
    public record Consolidated(Model model, int step) {
    }

    /**
     * The newest complete checkpoint in {@code dir} as a network. Newer checkpoints that are not intact are skipped,
     * each logged at WARN with why, followed by the one used instead; nothing on disk is changed.
     *
     * @throws IllegalArgumentException if {@code dir} holds no complete checkpoint, or one without a stored model
     *                                  configuration, or shards that do not tile the parameter vector
     * @throws IOException              if reading fails
     */
    public static Consolidated consolidate(Path dir) throws IOException {
        CheckpointStore store = new CheckpointStore(dir);
        CheckpointStore.Checkpoint c = store.newestComplete().orElseThrow(() -> new IllegalArgumentException(
                "checkpoint export: no complete checkpoint in " + dir + " (expected a manifest-NNNNNN.json whose "
                        + "shards are all intact)"));
        JsonNode json = c.json();
        if (!json.has("configuration")) {
            throw new IllegalArgumentException("checkpoint export: " + c.manifest() + " holds no model "
                    + "configuration (written by an older attn4j); it can only be resumed");
        }
        String kind = json.get("model").asText();
        String conf = json.get("configuration").asText();
        Model model;
        long params;
        if (kind.equals("ComputationGraph")) {
            ComputationGraphConfiguration g = ComputationGraphConfiguration.fromJson(conf);
            g.setIterationCount(json.get("iteration").asInt());
            g.setEpochCount(json.path("epoch").asInt());
            ComputationGraph graph = new ComputationGraph(g);
            graph.init();
            model = org.attn4j.layers.TiedEmbeddings.bind(graph);
            params = graph.numParams();
        } else {
            MultiLayerConfiguration m = MultiLayerConfiguration.fromJson(conf);
            m.setIterationCount(json.get("iteration").asInt());
            m.setEpochCount(json.path("epoch").asInt());
            MultiLayerNetwork net = new MultiLayerNetwork(m);
            net.init();
            model = net;
            params = net.numParams();
        }
        INDArray flat = model.params().reshape(params);
        long covered = 0;
        for (int r = 0; r < c.worldSize(); r++) {
            CheckpointStore.Shard shard = store.readShard(c, r);
            CheckpointStore.Header h = shard.header();
            if (h.sliceFrom() != covered || h.sliceTo() > params) {
                throw new IllegalArgumentException("checkpoint export: shard of rank " + r + " holds parameters ["
                        + h.sliceFrom() + ", " + h.sliceTo() + "), expected a slice starting at " + covered
                        + " within " + params);
            }
            flat.get(NDArrayIndex.interval(h.sliceFrom(), h.sliceTo())).assign(
                    shard.arrays().get(0).reshape(h.sliceTo() - h.sliceFrom()));
            covered = h.sliceTo();
        }
        if (covered != params) {
            throw new IllegalArgumentException("checkpoint export: the shards hold parameters [0, " + covered
                    + "), the model has " + params);
        }
        return new Consolidated(model, c.step());
    }

    /**
     * Writes the newest complete checkpoint in {@code dir} as a {@code ModelSerializer} zip at {@code out}
     * (written to a temporary file first, then renamed, so a failure never leaves half a model).
     *
     * @return the step of the exported checkpoint
     */
    public static int export(Path dir, Path out) throws IOException {
        Consolidated c = consolidate(dir);
        Path parent = out.toAbsolutePath().getParent();
        Files.createDirectories(parent);
        Path tmp = Files.createTempFile(parent, out.getFileName().toString(), ".tmp");
        try {
            ModelSerializer.writeModel(c.model(), tmp.toFile(), false);
            Files.move(tmp, out, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        } finally {
            Files.deleteIfExists(tmp);
        }
        return c.step();
    }
}
