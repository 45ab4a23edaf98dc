package org.attn4j.samples.plan;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.attn4j.distributed.plan.ClusterSpec;
import org.attn4j.distributed.plan.ModelSpec;
import org.attn4j.distributed.plan.PlanProblem;
import org.attn4j.distributed.plan.Planner;
import org.attn4j.distributed.plan.Prediction;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The model on the papers' own settings (docs/algorithms.md, "Cost model"): what it reproduces, and where it
 * stays below the papers' reported factors, as the model gives it (nothing here is tuned to a paper).
 */
class PlanPaperSettingsTest {

    private static final double GIB = 1L << 30;

    /** WallFacer section 3.2.2: llama-30B, B 1, N 65536, hidden 6656, P 64, C 4, bf16, one forward block. */
    @Test
    void wallFacerLlama30bVolumesMatchTheCaseStudy() {
        ModelSpec llama = ModelPreset.LLAMA_30B.model();
        PlanProblem p = new PlanProblem(ClusterPreset.WALLFACER_H100.cluster(), new ModelSpec(1, llama.heads(),
                llama.kvHeads(), llama.headDim(), 2, 1), 65536, false, false, 400);
        long x = p.xkv();                                        // B N H / P elements of K (or V), 2 bytes each
        assertEquals(1.625, 64 * 2 * x / GIB, 0.0, "equation 2's ring P2P: P hops of K and V");
        assertEquals(0.152, 4 * 3 * x / GIB, 0.0005, "equation 3's collective: 4 BNH (C-1) / P");
        assertEquals(0.40625, 16 / 4 * 2 * 4 * x / GIB, 0.0, "equation 4's P2P: P/C^2 hops of C K/V shards");

        Planner.Plan plan = Planner.plan(p, java.util.Map.of("team", 4.0));
        // attn4j's ring does not send the block that would return home: P-1 hops
        assertEquals(63 * 2 * x, plan.get("ring").forwardBytes());
        assertEquals(1.625 * 63 / 64, plan.get("ring").forwardBytes() / GIB, 1e-12);
        // WallFacer's busiest member: the team collectives (plus the LSE of the reduce-scatter) and R = 4 hops
        Prediction wall = plan.get("wallfacer");
        assertTrue(wall.config().startsWith("C=4"), wall.config());
        long lse = 3 * p.xlse();
        assertEquals(4 * 3 * x + lse + 16 * 2 * x, wall.forwardBytes());
        assertEquals(0.558, wall.forwardBytes() / GIB, 0.001, "0.152 GB collective + 0.406 GB P2P");
    }

    /** ATTENTION2D section 4.2, figure 5: ring attention gains nothing from 16 to 64 GPUs; ATTENTION2D-NO does. */
    @Test
    void ringDoesNotScaleFrom16To64GpusButAttention2dDoes() {
        Planner.Plan p16 = Planner.plan(gpt(ClusterPreset.A100_16, 0, ModelPreset.GPT3_2_7B, 131072));
        Planner.Plan p64 = Planner.plan(gpt(ClusterPreset.A100_64, 0, ModelPreset.GPT3_2_7B, 131072));
        assertTrue(p64.get("ring").totalSeconds() >= p16.get("ring").totalSeconds(), "ring does not speed up");
        double gain = p16.get("attention2d").totalSeconds() / p64.get("attention2d").totalSeconds();
        assertTrue(gain >= 1.4 && gain <= 2.2, "ATTENTION2D-NO 16 -> 64 GPUs: paper 1.4x measured, sqrt(4) = 2x "
                + "in theory; model " + gain);
    }

    /**
     * ATTENTION2D section 4.1: NO over ring >= 2.4x on 16 and >= 4x on 64 A100s, O >= 2.3x and >= 2.5x. Against
     * attn4j's ring, whose backward pass moves the query bundle (BurstAttention's algorithm 2), the model never
     * gives NO these factors; O reaches them only when every GPU has its own path out of the node (on 16 GPUs
     * only up to N = 65536). With the preset's one adapter per node both stay below 1x on 16 GPUs and below 2x on 64.
     */
    @ParameterizedTest(name = "{0}")
    @EnumSource(value = ModelPreset.class, names = {"GPT3_760M", "GPT3_2_7B", "GPT3_13B"})
    void attention2dReachesThePapersFactorsOnlyOverlappedAndWithAnAdapterPerGpu(ModelPreset model) {
        ClusterPreset a16 = ClusterPreset.A100_16;
        ClusterPreset a64 = ClusterPreset.A100_64;
        for (long n = 8192; n <= 131072; n *= 2) {
            String at = "N = " + n;
            assertTrue(speedup(a16, 4, model, n, "attention2d") < 2.4, at);
            assertTrue(speedup(a64, 4, model, n, "attention2d") < 4.0, at);
            assertEquals(n <= 65536, speedup(a16, 4, model, n, "attention2d-overlap") >= 2.3, at);
            assertTrue(speedup(a64, 4, model, n, "attention2d-overlap") >= 2.5, at);
            for (String algorithm : new String[] {"attention2d", "attention2d-overlap"}) {
                assertTrue(speedup(a16, 0, model, n, algorithm) < 1.0, "one adapter per node, 16 GPUs, " + at);
                assertTrue(speedup(a64, 0, model, n, algorithm) < 2.0, "one adapter per node, 64 GPUs, " + at);
            }
        }
    }

    /**
     * ATTENTION2D section 4.3 reports up to 8.6x (66B) and 9.4x (175B) on 64 H100 nodes; in the model the ratio is
     * capped by the busiest rank's bytes (about 3.6x), which ATTENTION2D-O reaches and ATTENTION2D-NO approaches.
     */
    @ParameterizedTest(name = "{0}")
    @EnumSource(value = ModelPreset.class, names = {"GPT3_66B", "GPT3_175B"})
    void attention2dOnSixtyFourH100NodesStaysAtTheRatioOfTheBytes(ModelPreset model) {
        for (long n = 8192; n <= 131072; n *= 2) {
            Planner.Plan plan = Planner.plan(gpt(ClusterPreset.H100_64, 0, model, n));
            Prediction ring = plan.get("ring");
            Prediction o = plan.get("attention2d-overlap");
            double bytes = (double) (ring.forwardBytes() + ring.backwardBytes())
                    / (o.forwardBytes() + o.backwardBytes());
            double no = plan.speedupOverRing(plan.get("attention2d"));
            double overlapped = plan.speedupOverRing(o);
            String at = "N = " + n + ": bytes " + bytes + ", NO " + no + ", O " + overlapped;
            assertTrue(bytes > 3.5 && bytes < 3.7, at);
            assertEquals(bytes, overlapped, 0.01 * bytes, at);
            assertTrue(no <= overlapped && no > 3.0, at);
        }
    }

    /**
     * WallFacer section 4.1: the best C is 2 on the 16-GPU-node A100 cluster and 4 on the 8-GPU-node one. The
     * model agrees on the 16-GPU nodes; on the 8-GPU nodes C = 4 is its best team size above 1, but ring
     * attention (C = 1) is slightly faster.
     */
    @Test
    void schedulerRanksThePapersTeamSizesFirstAmongTeams() {
        assertTrue(Planner.plan(gpt(ClusterPreset.WALLFACER_A100_16, 0, ModelPreset.GPT_7B, 131072))
                .get("wallfacer").config().startsWith("C=2,"));
        Prediction eight = Planner.plan(gpt(ClusterPreset.WALLFACER_A100_8, 0, ModelPreset.GPT_7B, 131072))
                .get("wallfacer");
        assertEquals("C=1 (ring)", eight.config());
        assertTrue(eight.alternatives().get(0).config().startsWith("C=4,"), eight.alternatives().get(0).config());
    }

    /** An algorithm's speedup over ring attention (forward and backward). */
    private static double speedup(ClusterPreset cluster, int nics, ModelPreset model, long n, String algorithm) {
        Planner.Plan plan = Planner.plan(gpt(cluster, nics, model, n));
        return plan.speedupOverRing(plan.get(algorithm));
    }

    /** A causal problem on a preset cluster at its rate, with {@code nics} adapters per node (0: the preset's). */
    private static PlanProblem gpt(ClusterPreset cluster, int nics, ModelPreset model, long n) {
        ClusterSpec c = nics == 0 ? cluster.cluster() : cluster.cluster().withNicsPerNode(nics);
        return new PlanProblem(c, model.model(), n, true, false, cluster.tflops());
    }
}
