package org.attn4j.samples;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.nd4j.linalg.api.buffer.DataType;

import picocli.CommandLine;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Model.OptionSpec;

/**
 * Every option of every command given a value it must refuse: one line on stderr, exit code 1 (bad input) or 2
 * (syntax), never an internal error or a stack trace, and nothing run. The walk covers every option picocli
 * knows, so a new option is tested as soon as it exists.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class BadOptionValuesTest {

    /** Options every value of which is valid (a seed, a free-text prompt, a label): nothing to refuse. */
    private static final Set<String> ANY_VALUE = Set.of("--seed", "--prompt", "--run");

    @TempDir
    Path tmp;

    @Test
    void everyOptionRefusesABadValueInOneLine() throws Exception {
        Path in = CheckFixture.random(DataType.FLOAT, 1, 2, 2, 16, 8, 1).writeTo(tmp.resolve("in"));
        Path file = Files.writeString(tmp.resolve("a-file"), "not a directory");
        Map<String, List<String>> required = Map.of(
                "check", List.of("--in", in.toString(), "--out", tmp.resolve("check-out").toString()),
                "checkpoint export", List.of("--dir", tmp.resolve("no-checkpoints").toString(), "--out",
                        tmp.resolve("model.zip").toString()),
                "generate", List.of("--model", tmp.resolve("no-model.zip").toString()));
        List<String> failures = new ArrayList<>();
        ExecutorService pool = Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r);
            t.setDaemon(true);
            return t;
        });
        int cases = 0;
        for (CommandLine cl : commands(Attn4jCli.commandLine())) {
            CommandSpec spec = cl.getCommandSpec();
            String name = Attn4jCli.commandName(cl);
            for (OptionSpec o : spec.options()) {
                if (o.usageHelp() || o.versionHelp() || o.arity().max() == 0 || ANY_VALUE.contains(o.longestName())
                        || required.getOrDefault(name, List.of()).contains(o.longestName())) {
                    continue;
                }
                String bad = badValue(o, file);
                List<String> args = new ArrayList<>(List.of(name.split(" ")));
                args.addAll(required.getOrDefault(name, List.of()));
                if (name.equals("launch")) {
                    args.addAll(List.of(o.longestName(), bad, "bench", "transport"));
                } else {
                    args.addAll(List.of(o.longestName(), bad));
                }
                cases++;
                Future<CliRun> run = pool.submit(() -> CliRun.of(args.toArray(new String[0])));
                String what = String.join(" ", args);
                try {
                    CliRun r = run.get(20, TimeUnit.SECONDS);
                    String[] lines = r.errLines();
                    if ((r.exitCode() != 1 && r.exitCode() != 2) || lines.length != 1
                            || r.err().contains("internal error") || r.err().contains("\tat ")) {
                        failures.add(what + " -> exit " + r.exitCode() + ": " + r.err().strip().replace("\n", " | "));
                    }
                } catch (TimeoutException e) {
                    run.cancel(true);
                    failures.add(what + " -> still running after 20 s (the bad value was accepted)");
                }
            }
        }
        pool.shutdownNow();
        assertTrue(cases > 100, "walked " + cases + " options");
        assertTrue(failures.isEmpty(), failures.size() + " of " + cases + " bad values not refused in one line:\n"
                + String.join("\n", failures));
    }

    @Test
    void valueNamesAreWordsAndDescriptionsWholeSentences() {
        List<String> bad = new ArrayList<>();
        for (CommandLine cl : commands(Attn4jCli.commandLine())) {
            String name = Attn4jCli.commandName(cl);
            if (name.equals("help")) {
                continue;                                 // picocli's own
            }
            String[] description = cl.getCommandSpec().usageMessage().description();
            if (description.length == 0 || !String.join(" ", description).strip().endsWith(".")) {
                bad.add(name + ": description does not end in a whole sentence");
            }
            for (OptionSpec o : cl.getCommandSpec().options()) {
                if (o.arity().max() == 0 || o.usageHelp() || o.versionHelp()) {
                    continue;
                }
                if (!o.paramLabel().matches("[A-Z][A-Za-z0-9_/,.:\\[\\]]*")) {
                    bad.add(name + " " + o.longestName() + ": value name " + o.paramLabel() + " is not a word");
                }
                String d = String.join(" ", o.description()).strip();
                if (!d.endsWith(".") && !d.endsWith(".)")) {
                    bad.add(name + " " + o.longestName() + ": description \"" + d + "\" is not a whole sentence");
                }
            }
        }
        assertTrue(bad.isEmpty(), String.join("\n", bad));
    }

    /** train, generate, check, plan, launch, checkpoint export and every bench: the commands with options. */
    private static List<CommandLine> commands(CommandLine root) {
        List<CommandLine> all = new ArrayList<>();
        collect(root.getSubcommands().values(), all);
        return all;
    }

    private static void collect(Collection<CommandLine> cls, List<CommandLine> into) {
        for (CommandLine cl : cls) {
            if (cl.getSubcommands().isEmpty()) {
                into.add(cl);
            } else {
                collect(cl.getSubcommands().values(), into);
            }
        }
    }

    /** A value the option must refuse, from its type and role. */
    private static String badValue(OptionSpec o, Path file) {
        Class<?> type = o.auxiliaryTypes().length > 0 && (List.class.isAssignableFrom(o.type()))
                ? o.auxiliaryTypes()[0] : o.type();
        if (type == int.class || type == Integer.class || type == long.class || type == Long.class
                || type == double.class || type == Double.class || type == float.class) {
            return "-5";
        }
        if (type == Path.class) {
            String n = o.longestName();
            boolean written = n.contains("out") || n.contains("dir") || n.contains("json");
            return written ? file.toString() : file.resolveSibling("no-such-input").toString();
        }
        return "no-such-value";
    }
}
