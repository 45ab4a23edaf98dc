package org.attn4j.distributed.launch;

/**
 * A worker for the launcher tests, without ND4J or a transport: {@code hello} prints its environment,
 * {@code flags} prints its JVM's flags (one line, joined by a space), {@code fail R CODE} makes rank R exit with CODE at once while the others sleep, {@code sleep} sleeps.
 */
public final class LauncherProbe {

    private LauncherProbe() {
    }

    /** Entry point; see the class comment. */
    public static void main(String[] args) throws InterruptedException {
        WorkerEnvironment env = WorkerEnvironment.fromEnvironment();
        switch (args[0]) {
            case "hello" -> {
                System.out.println("hello from " + env.rank() + " of " + env.worldSize() + " at " + env.self()
                        + " OMP_NUM_THREADS=" + System.getenv("OMP_NUM_THREADS") + " token "
                        + env.jobToken().length() + " " + String.join(" ", java.util.Arrays.copyOfRange(args, 1,
                        args.length)));
                System.err.println("note from " + env.rank());
            }
            case "flags" -> System.out.println("flags " + String.join(" ",
                    java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()));
            case "fail" -> {
                if (env.rank() == Integer.parseInt(args[1])) {
                    System.err.println("rank " + env.rank() + " giving up");
                    System.exit(Integer.parseInt(args[2]));
                }
                Thread.sleep(60_000);
            }
            case "sleep" -> Thread.sleep(60_000);
            default -> throw new IllegalArgumentException("unknown mode " + args[0]);
        }
    }
}
