package org.attn4j.samples;

/**
 * A worker for the launch command tests, without ND4J: {@code ok} prints its rank and world size;
 * {@code fail R CODE} makes rank R exit with CODE while the others sleep.
 */
public final class LaunchProbe {

    private LaunchProbe() {
    }

    /** Entry point; see the class comment. */
    public static void main(String[] args) throws InterruptedException {
        int rank = Integer.parseInt(System.getenv("ATTN4J_RANK"));
        if (args[0].equals("ok")) {
            System.out.println("worker " + rank + " of " + System.getenv("ATTN4J_WORLD_SIZE") + " args "
                    + String.join(" ", args));
        } else if (rank == Integer.parseInt(args[1])) {
            System.exit(Integer.parseInt(args[2]));
        } else {
            Thread.sleep(60_000);
        }
    }
}
