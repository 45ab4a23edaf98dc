package org.attn4j.samples.plan;

import java.util.Arrays;
import java.util.stream.Collectors;

import org.attn4j.distributed.plan.ClusterSpec;

/**
 * The clusters of the papers' experiments, for {@code attn4j plan --cluster NAME}. What a paper states is taken
 * from it (section or table named in {@link #source()}); what it does not state (link speeds, latencies, the
 * kernel rate) is an assumption, and {@link #assumed()} says which. Any field can be overridden by its option.
 */
public enum ClusterPreset {

    /** ATTENTION2D section 4.1: 4 nodes of 4 A100 on PCIe, Ethernet between nodes. */
    A100_16("a100-16", new ClusterSpec(4, 4, 25, 10, 12.5, 30, 1), 150,
            "ATTENTION2D section 4.1 (4 nodes x 4 A100, PCIe inside, Ethernet between)",
            "PCIe 4.0 x16 at 25 GB/s, 10 us; Ethernet 100 Gb/s (12.5 GB/s), one adapter per node, 30 us; "
                    + "attention kernel 150 TFLOP/s (about half the A100's 312 TFLOP/s bf16 peak)"),

    /** ATTENTION2D section 4.1: 16 nodes of 4 A100 on PCIe, Ethernet between nodes. */
    A100_64("a100-64", new ClusterSpec(16, 4, 25, 10, 12.5, 30, 1), 150,
            "ATTENTION2D section 4.1 (16 nodes x 4 A100, PCIe inside, Ethernet between)",
            "as a100-16"),

    /** ATTENTION2D section 4.3: 64 nodes of one H100, Ethernet. */
    H100_64("h100-64", new ClusterSpec(64, 1, 450, 5, 12.5, 30, 1), 400,
            "ATTENTION2D section 4.3 (64 nodes x 1 H100, Ethernet)",
            "Ethernet 100 Gb/s (12.5 GB/s), 30 us; attention kernel 400 TFLOP/s (about 40% of the H100's "
                    + "989 TFLOP/s bf16 peak); no link inside a node is used"),

    /** WallFacer table 2: 8 nodes of 8 H100, NVLink inside, InfiniBand with eight adapters per node. */
    WALLFACER_H100("wallfacer-h100", new ClusterSpec(8, 8, 450, 5, 50, 10, 8), 400,
            "WallFacer table 2 and section 4.1 (8 nodes x 8 H100, NVLink, InfiniBand, 8 adapters per node)",
            "NVLink 450 GB/s per direction, 5 us; InfiniBand 400 Gb/s (50 GB/s) per adapter, 10 us; "
                    + "attention kernel 400 TFLOP/s"),

    /** WallFacer table 2: 4 nodes of 8 A100, NVLink inside, 100 Gbps Ethernet. */
    WALLFACER_A100_8("wallfacer-a100-8x4", new ClusterSpec(4, 8, 300, 5, 12.5, 30, 1), 150,
            "WallFacer table 2 (4 nodes x 8 A100 40GB, NVLink, 100 Gbps Ethernet)",
            "NVLink 300 GB/s per direction, 5 us; one 100 Gb/s adapter per node, 30 us; 150 TFLOP/s"),

    /** WallFacer table 2: 2 nodes of 16 A100, NVLink inside, 100 Gbps Ethernet. */
    WALLFACER_A100_16("wallfacer-a100-16x2", new ClusterSpec(2, 16, 300, 5, 12.5, 30, 1), 150,
            "WallFacer table 2 (2 nodes x 16 A100 40GB, NVLink, 100 Gbps Ethernet)",
            "as wallfacer-a100-8x4"),

    /** BurstAttention section 4.1: 4 nodes of 8 A100 on PCIe, 600 Gb/s RoCE. */
    BURST_A100_32("burst-a100-32", new ClusterSpec(4, 8, 25, 10, 75, 10, 1), 150,
            "BurstAttention section 4.1 (4 nodes x 8 A100, PCIe inside, 600 Gb/s RoCE between)",
            "PCIe at 25 GB/s, 10 us; the 600 Gb/s (75 GB/s) as one adapter per node, 10 us; 150 TFLOP/s"),

    /** LASP appendix A.1: DGX-A100 nodes, NVSwitch 600 GB/s, eight RoCE adapters of 100 Gb/s. */
    LASP_DGX_A100("lasp-dgx-a100", new ClusterSpec(16, 8, 300, 5, 12.5, 10, 8), 150,
            "LASP appendix A.1 (16 DGX-A100 x 8 A100, NVSwitch 600 GB/s, 8 RoCE adapters, 800 Gb/s per node)",
            "the 600 GB/s as 300 GB/s per direction, 5 us; 10 us between nodes; 150 TFLOP/s");

    private final String cliName;
    private final ClusterSpec cluster;
    private final double tflops;
    private final String source;
    private final String assumed;

    ClusterPreset(String cliName, ClusterSpec cluster, double tflops, String source, String assumed) {
        this.cliName = cliName;
        this.cluster = cluster;
        this.tflops = tflops;
        this.source = source;
        this.assumed = assumed;
    }

    /** The name given to {@code --cluster}. */
    public String cliName() {
        return cliName;
    }

    /** The machines. */
    public ClusterSpec cluster() {
        return cluster;
    }

    /** The assumed rate of the attention kernel, TFLOP/s. */
    public double tflops() {
        return tflops;
    }

    /** Where the setting comes from. */
    public String source() {
        return source;
    }

    /** What the paper does not state and the preset assumes. */
    public String assumed() {
        return assumed;
    }

    /**
     * The preset of a name, ignoring case.
     *
     * @throws IllegalArgumentException naming the known presets
     */
    public static ClusterPreset of(String name) {
        for (ClusterPreset p : values()) {
            if (p.cliName.equalsIgnoreCase(name.strip())) {
                return p;
            }
        }
        throw new IllegalArgumentException("unknown cluster preset '" + name + "'; expected one of " + names());
    }

    /** The names, comma separated. */
    public static String names() {
        return Arrays.stream(values()).map(ClusterPreset::cliName).collect(Collectors.joining(", "));
    }
}
