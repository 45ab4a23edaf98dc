package org.attn4j.samples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.attn4j.ops.Documents;
import org.attn4j.ops.flash.AttentionGradients;
import org.attn4j.ops.flash.AttentionMask;
import org.attn4j.ops.flash.AttentionOutput;
import org.attn4j.ops.flash.FlashAttention;
import org.attn4j.ops.linear.Decay;
import org.attn4j.ops.linear.LinearAttention;
import org.attn4j.ops.linear.LinearAttentionGradients;
import org.attn4j.ops.linear.LinearAttentionOutput;
import org.attn4j.samples.io.Npy;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.shade.jackson.databind.JsonNode;
import org.nd4j.shade.jackson.databind.ObjectMapper;

/**
 * {@code attn4j check --algo ALGO --workers 4}: four real worker processes over Aeron produce the single-device
 * op's outputs and gradients (float64, 1e-12 relative), and stats.json carries every rank's bytes.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class DistributedCheckCommandTest {

    @TempDir
    Path dir;

    @ParameterizedTest(name = "{0} {1} documents={2}")
    @CsvSource({
        "wallfacer, --causal --team 2, false",
        "attention2d, --window 20, false",
        "attention2d-overlap, --causal, false",
        "ulysses, --causal, false",
        "ring, --causal --layout striped, true",
        "lasp, --causal --decay 0.9, true"})
    void fourWorkerProcessesEqualTheSingleDeviceOp(String algo, String options, boolean packed) throws Exception {
        int hkv = algo.equals("ulysses") ? 4 : 2;
        CheckFixture f = CheckFixture.random(DataType.DOUBLE, 2, 4, hkv, 48, 8, algo.hashCode());
        Path in = f.writeTo(dir.resolve("in"));
        Documents docs = packed ? Documents.random(algo.hashCode(), 2, 48, 12) : null;
        if (packed) {
            byte[] ids = new byte[4 * 2 * 48];
            java.nio.IntBuffer b = java.nio.ByteBuffer.wrap(ids).order(java.nio.ByteOrder.LITTLE_ENDIAN).asIntBuffer();
            b.put(docs.ids(0)).put(docs.ids(1));
            CheckFixture.writeRaw(in.resolve("segments.npy"), "<i4", "(2, 48)", ids);
        }
        Path out = dir.resolve("out");
        List<String> args = new ArrayList<>(List.of("check", "--algo", algo, "--workers", "4", "--worker-heap", "1g",
                "--in", in.toString(), "--out", out.toString()));
        args.addAll(List.of(options.strip().split(" ")));
        CliRun r = CliRun.of(args.toArray(new String[0]));
        assertEquals(0, r.exitCode(), r.err());

        boolean causal = options.contains("--causal");
        INDArray[] expected;
        if (algo.equals("lasp")) {
            LinearAttention op = LinearAttention.defaults();
            LinearAttentionOutput o = op.forward(f.q(), f.k(), f.v(), Decay.of(0.9), true, null, docs);
            LinearAttentionGradients g = op.backward(f.q(), f.k(), f.v(), Decay.of(0.9), true, null, f.dO(), null,
                    o.cache(), docs);
            expected = new INDArray[] {o.output(), null, g.dq(), g.dk(), g.dv()};
        } else {
            AttentionMask mask = AttentionMask.builder().causal(causal).window(options.contains("--window") ? 20 : 0)
                    .documents(docs).build();
            double scale = FlashAttention.defaultScale(8);
            AttentionOutput o = FlashAttention.defaults().forward(f.q(), f.k(), f.v(), mask, scale);
            AttentionGradients g = FlashAttention.defaults().backward(f.q(), f.k(), f.v(), o.output(), o.lse(), f.dO(),
                    mask, scale);
            expected = new INDArray[] {o.output(), o.lse(), g.dq(), g.dk(), g.dv()};
        }
        String[] files = {"o.npy", "lse.npy", "dq.npy", "dk.npy", "dv.npy"};
        for (int i = 0; i < files.length; i++) {
            if (expected[i] == null) {
                assertFalse(Files.exists(out.resolve(files[i])), files[i] + " written for linear attention");
                continue;
            }
            INDArray got = Npy.read(out.resolve(files[i]));
            // Padded queries' log-sum-exp is -inf in both: compared as equal, the rest by relative error.
            double[] g = got.dup().data().asDouble();
            double[] e = expected[i].dup().data().asDouble();
            double diff = 0;
            double norm = 0;
            for (int j = 0; j < e.length; j++) {
                boolean bothInfinite = Double.isInfinite(e[j]) && g[j] == e[j];
                diff += bothInfinite ? 0 : (g[j] - e[j]) * (g[j] - e[j]);
                norm += Double.isInfinite(e[j]) ? 0 : e[j] * e[j];
            }
            double err = Math.sqrt(diff / norm);
            assertTrue(err <= 1e-12, algo + " " + files[i] + " relative error " + err);
        }
        JsonNode stats = new ObjectMapper().readTree(out.resolve("stats.json").toFile());
        assertEquals(4, stats.get("workers").asInt());
        assertEquals(4, stats.get("bytes_sent").size());
        assertEquals(4, stats.get("ranks").size());
        long total = 0;
        for (JsonNode rank : stats.get("bytes_sent")) {
            total += rank.get("forward").asLong() + rank.get("backward").asLong();
        }
        assertTrue(total > 0, "four workers must have sent something: " + stats.get("bytes_sent"));
    }

    @Test
    void refusesAnInvalidConfigurationBeforeStartingWorkers() throws Exception {
        Path in = CheckFixture.random(DataType.FLOAT, 1, 4, 2, 40, 8, 3).writeTo(dir.resolve("in"));
        String[][] cases = {
            {"wallfacer", "--team", "2", "--workers", "6"},
            {"ulysses", "--workers", "4"},
            {"attention2d", "--workers", "4", "--layout", "zigzag"},
            {"ring", "--workers", "3"},
            {"flash", "--workers", "2"}};
        String[] expected = {
            "C^2 must divide P",
            "must divide both H = 4 and Hkv = 2",
            "needs the striped layout",
            "N = 40 must be a positive multiple of 3",
            "apply to the sequence-parallel algorithms"};
        for (int i = 0; i < cases.length; i++) {
            List<String> args = new ArrayList<>(List.of("check", "--algo"));
            args.addAll(List.of(cases[i]));
            args.addAll(List.of("--in", in.toString(), "--out", dir.resolve("out" + i).toString()));
            CliRun r = CliRun.of(args.toArray(new String[0]));
            assertEquals(Attn4jCli.EXIT_BAD_INPUT, r.exitCode(), String.join(" ", cases[i]) + ": " + r.err());
            assertTrue(r.err().contains(expected[i]), String.join(" ", cases[i]) + ": " + r.err());
            assertFalse(r.out().contains("[rank"), "no worker may start: " + r.out());
        }
    }
}
