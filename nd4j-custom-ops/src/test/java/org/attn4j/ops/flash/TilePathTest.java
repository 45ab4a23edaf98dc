package org.attn4j.ops.flash;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.Function;

import org.attn4j.ops.Kernel;
import org.attn4j.ops.flash.TilePath.Cause;
import org.attn4j.ops.flash.TilePath.Reason;
import org.junit.jupiter.api.Test;
import org.nd4j.linalg.api.buffer.DataType;

/**
 * {@link TilePath} names the cause that is true: each property by its own name, and each way the native library can
 * be missing (not built, not loadable, no AVX-512F, another OS) by what happened, provoked through
 * {@link NativeTileMath#load}'s arguments; and the kernels get the tile math it names. The missing Vector API module
 * and the log line need a JVM of their own: {@link TileCodeLogTest}.
 */
class TilePathTest {

    private static final String LINUX = "Linux";
    private static final String X86_64 = "amd64";

    @Test
    void namesNoVectorAsTheCauseNotNativeTiles() {
        withProperties(Map.of(TilePath.NO_VECTOR, "true"), () -> {
            TilePath path = TilePath.current();
            assertEquals(Cause.NO_VECTOR_PROPERTY, path.nativeOff().cause());
            String said = FlashAttention.tileCode();
            assertTrue(said.startsWith("ND4J element-wise ops"), said);
            assertTrue(said.contains("-Dattn4j.noVector=true"), said);
            assertFalse(said.contains("nativeTiles"), said);
            assertFalse(path.fallback(), "a property chose it: info, not a warning");
            assertInstanceOf(Nd4jTileMath.class, TileMath.forType(DataType.FLOAT));
            assertInstanceOf(Nd4jTileMath.class, TileMath.forType(DataType.DOUBLE));
        });
    }

    @Test
    void namesNativeTilesAsTheCauseWhenOnlyItIsSet() {
        withProperties(Map.of(TilePath.NATIVE_TILES, "false"), () -> {
            TilePath path = TilePath.current();
            assertEquals(Cause.NATIVE_TILES_PROPERTY, path.nativeOff().cause());
            String said = FlashAttention.tileCode();
            assertTrue(said.startsWith("Java Vector API tile pass"), said);
            assertTrue(said.contains("-Dattn4j.nativeTiles=false"), said);
            assertFalse(said.contains("noVector"), said);
            TileMath math = TileMath.forType(DataType.FLOAT);
            assertFalse(math instanceof NativeTileMath || math instanceof Nd4jTileMath, math.getClass().getName());
        });
    }

    @Test
    void namesThePortableKernelAndThePropertyThatChoseIt() {
        withProperties(Map.of(Kernel.PROPERTY, "portable"), () -> {
            TilePath path = TilePath.current();
            assertEquals(Kernel.PORTABLE, path.kernel());
            assertEquals(Cause.KERNEL_PROPERTY, path.portable().cause());
            assertEquals("portable kernel, ND4J operations only (chosen by -Dattn4j.kernel=portable)",
                    FlashAttention.tileCode());
            assertFalse(path.fallback());
        });
    }

    @Test
    void cpuKernelTileMathIsWhatThePathNames() {
        withProperties(Map.of(Kernel.PROPERTY, "cpu"), () -> {
            TilePath path = TilePath.current();
            assertEquals(Kernel.CPU, path.kernel());
            TileMath math = TileMath.forType(DataType.FLOAT);
            assertEquals(path.nativeInUse(), math instanceof NativeTileMath, path.describe());
            assertEquals(!path.nativeInUse() && !path.vectorInUse(), math instanceof Nd4jTileMath, path.describe());
            assertEquals(path.nativeInUse() ? "native AVX-512 tile code" : path.describe(), FlashAttention.tileCode());
        });
    }

    @Test
    void namesTheHostWhenItIsNotLinuxX8664() {
        Reason why = NativeTileMath.load("Mac OS X", "aarch64", name -> {
            throw new AssertionError("no resource is read on another OS, asked for " + name);
        }, path -> { }, () -> true);
        assertEquals(Cause.NOT_LINUX_X86_64, why.cause());
        assertEquals("it is built for Linux x86-64 only, this is Mac OS X aarch64", why.text());
    }

    @Test
    void quotesTheBuildsNoteWhenTheLibraryIsNotInTheJar() {
        String note = "the build's gcc step failed with exit status 1";
        Reason why = NativeTileMath.load(LINUX, X86_64, jar(Map.of(NativeTileMath.NOT_BUILT, note + "\n")),
                path -> { }, () -> true);
        assertEquals(Cause.NOT_BUILT, why.cause());
        assertEquals("libattn4jtiles.so is not in this build: " + note + " (the build output says more)", why.text());
    }

    @Test
    void saysTheGccStepWasSkippedOrFailedWhenTheJarHasNoNoteEither() {
        Reason why = NativeTileMath.load(LINUX, X86_64, jar(Map.of()), path -> { }, () -> true);
        assertEquals(Cause.NOT_BUILT, why.cause());
        assertTrue(why.text().contains("its gcc step was skipped or failed"), why.text());
    }

    @Test
    void givesTheLoadersOwnMessageWhenTheLibraryDoesNotLoad() {
        // A file that is no shared object, through the real System.load: the loader's own complaint must come out.
        String garbage = "x".repeat(4096);
        Reason why = NativeTileMath.load(LINUX, X86_64, jar(Map.of(NativeTileMath.RESOURCE, garbage)), System::load,
                () -> true);
        assertEquals(Cause.LOAD_FAILED, why.cause());
        assertTrue(why.text().startsWith("libattn4jtiles.so did not load: "), why.text());
        assertTrue(why.text().contains("invalid ELF header"), why.text());
    }

    @Test
    void pointsAtANoexecTemporaryDirectoryWhenTheLoaderCannotMapIt() {
        Reason why = NativeTileMath.load(LINUX, X86_64, jar(Map.of(NativeTileMath.RESOURCE, "so")), failing(
                "/tmp/attn4jtiles1.so: /tmp/attn4jtiles1.so: failed to map segment from shared object"), () -> true);
        assertEquals(Cause.LOAD_FAILED, why.cause());
        assertTrue(why.text().contains("failed to map segment from shared object"), why.text());
        assertTrue(why.text().contains("mounted noexec? -Djava.io.tmpdir=DIR picks another"), why.text());
    }

    @Test
    void saysTheCLibraryIsTooOldWhenTheLoaderMissesAGlibcVersion() {
        Reason why = NativeTileMath.load(LINUX, X86_64, jar(Map.of(NativeTileMath.RESOURCE, "so")), failing(
                "/lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.38' not found (required by /tmp/attn4jtiles2.so)"),
                () -> true);
        assertEquals(Cause.LOAD_FAILED, why.cause());
        assertTrue(why.text().contains("`GLIBC_2.38' not found"), why.text());
        assertTrue(why.text().contains("older than the one it was built against"), why.text());
    }

    @Test
    void saysTheCopyFailedWhenTheLibraryCannotBeWrittenOut() {
        InputStream broken = new InputStream() {
            @Override
            public int read() throws IOException {
                throw new IOException("No space left on device");
            }
        };
        Reason why = NativeTileMath.load(LINUX, X86_64, name -> name.equals(NativeTileMath.RESOURCE) ? broken : null,
                path -> { }, () -> true);
        assertEquals(Cause.LOAD_FAILED, why.cause());
        assertTrue(why.text().startsWith("libattn4jtiles.so could not be copied out of the jar into "), why.text());
        assertTrue(why.text().endsWith("No space left on device"), why.text());
    }

    @Test
    void namesAvx512fWhenTheLibraryLoadsOnACpuWithoutIt() {
        Reason why = NativeTileMath.load(LINUX, X86_64, jar(Map.of(NativeTileMath.RESOURCE, "so")), path -> { },
                () -> false);
        assertEquals(Cause.NO_AVX512F, why.cause());
        assertTrue(why.text().startsWith("this CPU has no AVX-512F"), why.text());
    }

    @Test
    void isUsableWhenTheLibraryLoadsOnACpuWithAvx512f() {
        String[] loaded = new String[1];
        assertNull(NativeTileMath.load(LINUX, X86_64, jar(Map.of(NativeTileMath.RESOURCE, "so")),
                path -> loaded[0] = path, () -> true));
        assertNotNull(loaded[0], "the library was handed to the loader");
    }

    @Test
    void warnsOnlyWhenTheBuildOrTheHostForcedTheSlowerPath() {
        Reason notBuilt = new Reason(Cause.NOT_BUILT, "not built");
        Reason noModule = new Reason(Cause.NO_VECTOR_MODULE, "no module");
        Reason property = new Reason(Cause.NATIVE_TILES_PROPERTY, "property");
        Reason backend = new Reason(Cause.NOT_CPU_BACKEND, "backend");
        assertFalse(new TilePath(Kernel.CPU, null, null, null).fallback(), "native code and Vector API");
        assertTrue(new TilePath(Kernel.CPU, null, notBuilt, null).fallback(), "not built");
        assertTrue(new TilePath(Kernel.CPU, null, null, noModule).fallback(), "native code, no Vector API module");
        assertTrue(new TilePath(Kernel.CPU, null, property, noModule).fallback(), "property, and no module");
        assertFalse(new TilePath(Kernel.CPU, null, property, null).fallback(), "a property chose the Java code");
        assertFalse(new TilePath(Kernel.PORTABLE, backend, notBuilt, null).fallback(),
                "the portable kernel on another backend runs no tile code");
    }

    @Test
    void namesBothCausesWhenTheNativeCodeAndTheVectorModuleAreMissing() {
        TilePath path = new TilePath(Kernel.CPU, null, new Reason(Cause.NO_AVX512F, "this CPU has no AVX-512F"),
                new Reason(Cause.NO_VECTOR_MODULE, "the module jdk.incubator.vector is not present"));
        assertEquals("ND4J element-wise ops and OpenBLAS products (native tile code not in use: this CPU has no "
                + "AVX-512F; Vector API not in use: the module jdk.incubator.vector is not present)", path.describe());
    }

    /** A jar holding {@code entries} (resource name to content); every other resource is absent. */
    private static Function<String, InputStream> jar(Map<String, String> entries) {
        return name -> entries.containsKey(name)
                ? new ByteArrayInputStream(entries.get(name).getBytes(StandardCharsets.UTF_8)) : null;
    }

    /** A loader that fails as {@link System#load} does, with {@code message}. */
    private static Consumer<String> failing(String message) {
        return path -> {
            throw new UnsatisfiedLinkError(message);
        };
    }

    /** Runs {@code body} with {@code properties} set and then restores their earlier values. */
    private static void withProperties(Map<String, String> properties, Runnable body) {
        Map<String, String> before = new HashMap<>();
        // Another execution may set the kernel (attn4j.kernel=portable): the tile code is the CPU kernel's.
        Map<String, String> set = new HashMap<>(Map.of(Kernel.PROPERTY, "cpu"));
        set.putAll(properties);
        set.forEach((k, v) -> before.put(k, System.setProperty(k, v)));
        try {
            body.run();
        } finally {
            before.forEach((k, v) -> {
                if (v == null) {
                    System.clearProperty(k);
                } else {
                    System.setProperty(k, v);
                }
            });
        }
    }
}
