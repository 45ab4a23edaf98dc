package org.attn4j.samples.train;

import java.awt.Color;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;

import org.attn4j.samples.OutOfMemory;
import org.attn4j.samples.io.FileTrees;
import org.deeplearning4j.nn.api.Model;
import org.deeplearning4j.util.ModelSerializer;
import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.XYSeries;
import org.knowm.xchart.style.Styler;
import org.knowm.xchart.style.markers.SeriesMarkers;
import org.nd4j.shade.jackson.databind.JsonNode;
import org.nd4j.shade.jackson.databind.ObjectMapper;
import org.nd4j.shade.jackson.databind.SerializationFeature;
import org.nd4j.shade.jackson.databind.node.ObjectNode;

/**
 * What {@code attn4j train} leaves in its output directory, kept current while it runs, so that a run that fails
 * late still leaves what it did:
 * <pre>
 *   summary.json  the settings; "status": "running", "completed", or "failed: " / "stopped: " and one line;
 *                 "steps_done"; the step model.zip holds ("checkpoint_step"); losses, and at the end accuracy, speed
 *                 and peak memory
 *   model.zip     the model (weights, no optimizer state): before the first step, every --checkpoint-every steps,
 *                 after the last
 *   loss.png      the loss curve of the steps done, at the end (after a failure too)
 * </pre>
 * Every file is written beside its name and then moved over it, so a failure while writing (a full disk, the memory
 * bound tripping) leaves the previous version whole. A process ended from outside (a signal, its launcher stopping
 * it) leaves "stopped: ..." with the steps done, written by a shutdown hook; one killed outright (SIGKILL, the
 * kernel's out-of-memory killer) leaves "running", which {@link #failedIfUnfinished} turns into a failure when
 * something survives it to say so. Thread-safe: the hook and the training thread write under one lock, and once a
 * run has ended nothing more is written, so model.zip and the summary's "checkpoint_step" always agree.
 */
public final class TrainingRecord {

    /** The summary's file name. */
    public static final String SUMMARY = "summary.json";
    /** The model's file name. */
    static final String MODEL = "model.zip";
    /** The loss curve's file name. */
    public static final String CURVE = "loss.png";
    /** The status of a run that has not ended. */
    static final String RUNNING = "running";
    /** The status of a run that did all it was asked. */
    static final String COMPLETED = "completed";
    /** How the status of a run ended from outside begins. */
    static final String STOPPED = "stopped";

    private static final ObjectMapper JSON = new ObjectMapper().enable(SerializationFeature.INDENT_OUTPUT);

    private final Path dir;
    private final ObjectNode settings;
    private final Thread onExit = new Thread(this::stopped, "attn4j-train-record");
    private int checkpointStep = -1;
    private int stepsDone;
    private ObjectNode results;
    private boolean ended;

    /**
     * Creates {@code dir} and a summary of {@code settings} with status "running" and no step done.
     *
     * @throws IOException if the directory or the summary cannot be written
     */
    public TrainingRecord(Path dir, ObjectNode settings) throws IOException {
        this.dir = dir;
        this.settings = settings.deepCopy();
        Files.createDirectories(dir);
        write(summary(RUNNING));
        Runtime.getRuntime().addShutdownHook(onExit);
    }

    /** {@code stepsDone} steps are done, and {@code results} is what is known of them; written at the next event. */
    public synchronized void stepDone(int stepsDone, ObjectNode results) {
        this.stepsDone = stepsDone;
        this.results = results;
    }

    /** Writes a model to a path that does not exist yet (a file, or a directory it creates). */
    @FunctionalInterface
    public interface ModelWriter {
        void write(Path to) throws IOException;
    }

    /**
     * Saves {@code net} as the model of {@code step} (steps done), {@value #MODEL}, and says so in the summary;
     * nothing once the run has ended.
     *
     * @throws IOException if it cannot be written; the previous model stays
     */
    synchronized void checkpoint(Model net, int step) throws IOException {
        checkpoint(MODEL, to -> {
            try (OutputStream o = Files.newOutputStream(to)) {
                ModelSerializer.writeModel(net, o, false);
            }
        }, step);
    }

    /**
     * Saves the model of {@code step} (steps done) as {@code name} (a file or a directory) with {@code writer}, and
     * says so in the summary; nothing once the run has ended. It is written beside its name first; a directory then
     * replaces the previous one by two renames, so at every moment {@code name} or {@code name.old} holds a whole
     * model.
     *
     * @throws IOException if it cannot be written; the previous model stays
     */
    public synchronized void checkpoint(String name, ModelWriter writer, int step) throws IOException {
        if (ended) {
            return;
        }
        Path tmp = dir.resolve(name + ".tmp");
        FileTrees.delete(tmp);
        try {
            writer.write(tmp);
        } catch (IOException | RuntimeException | Error e) {
            try {
                FileTrees.delete(tmp);
            } catch (IOException | RuntimeException cleanup) {
                e.addSuppressed(cleanup);
            }
            throw e;
        }
        Path target = dir.resolve(name);
        if (Files.isDirectory(tmp)) {
            Path old = dir.resolve(name + ".old");
            FileTrees.delete(old);
            if (Files.exists(target)) {
                Files.move(target, old);
            }
            Files.move(tmp, target);
            FileTrees.delete(old);
        } else {
            replace(tmp, target);
        }
        checkpointStep = step;
        stepsDone = Math.max(stepsDone, step);
        write(summary(RUNNING));
    }

    /** The first and the last loss of {@code losses} (one per step), null before the first step. */
    public static ObjectNode lossResults(List<Double> losses) {
        ObjectNode r = JSON.createObjectNode();
        if (losses.isEmpty()) {
            r.putNull("first_loss").putNull("final_loss");
        } else {
            r.put("first_loss", losses.get(0)).put("final_loss", losses.get(losses.size() - 1));
        }
        return r;
    }

    /** The summary of a run that did all its {@code stepsDone} steps, with its {@code results}. */
    public synchronized void completed(int stepsDone, ObjectNode results) throws IOException {
        stepDone(stepsDone, results);
        end(COMPLETED);
    }

    /**
     * The summary of a run that failed after the steps done: status "failed: " and the failure in one line, with the
     * results known so far. A failure to write it is added to {@code failure} as suppressed, so the caller can
     * rethrow the failure that matters.
     */
    public synchronized void failed(Throwable failure) {
        try {
            end("failed: " + OutOfMemory.describe(failure));
        } catch (IOException | RuntimeException | Error e) {
            failure.addSuppressed(e);
        }
    }

    /**
     * {@link #failed} with the curve of the steps done ({@code title} names the run; the steps done are appended),
     * if there were any. A failure to draw it is added to {@code failure} as suppressed.
     */
    public void failed(Throwable failure, String title, String series, int firstStep, List<Double> losses) {
        failed(failure);
        if (!losses.isEmpty()) {
            try {
                lossCurve(title + " (failed after " + (firstStep + losses.size()) + " steps)", series, firstStep,
                        losses);
            } catch (IOException | RuntimeException | Error curve) {
                failure.addSuppressed(curve);
            }
        }
    }

    /** The shutdown hook: a run that has not ended by then was ended from outside. */
    private synchronized void stopped() {
        if (ended) {
            return;
        }
        try {
            end(STOPPED + ": the process was ended from outside (a signal, or its launcher) after step " + stepsDone);
        } catch (IOException | RuntimeException e) {
            // nothing to tell it to: the process is going away
        }
    }

    private void end(String status) throws IOException {
        if (ended) {
            return;
        }
        ended = true;
        if (Thread.currentThread() != onExit) {
            try {
                Runtime.getRuntime().removeShutdownHook(onExit);
            } catch (IllegalStateException e) {
                // already shutting down: the hook will find the run ended
            }
        }
        write(summary(status));
    }

    /**
     * Marks the summary in {@code dir} failed with {@code message} if the run did not say how it ended (its status is
     * "running" or "stopped: ...", or there is none: the process that kept it was killed or stopped), keeping what it
     * says; else leaves it.
     *
     * @param settings the run's settings, for a summary that does not exist
     * @throws IOException if it cannot be read or written
     */
    public static void failedIfUnfinished(Path dir, ObjectNode settings, String message) throws IOException {
        Path file = dir.resolve(SUMMARY);
        ObjectNode s;
        if (Files.isRegularFile(file)) {
            JsonNode old = JSON.readTree(file.toFile());
            String status = old.path("status").asText();
            if (!(old instanceof ObjectNode o) || !(status.equals(RUNNING) || status.startsWith(STOPPED))) {
                return;
            }
            s = o;
        } else {
            s = settings.deepCopy();
            s.put("steps_done", 0);
            s.putNull("checkpoint_step");
        }
        s.put("status", "failed: " + message);
        Files.createDirectories(dir);
        writeJson(dir, s);
    }

    /**
     * Draws {@code losses} (one per step, the first at step {@code firstStep}) with their moving mean.
     *
     * @throws IOException if it cannot be written; the previous curve stays
     */
    public void lossCurve(String title, String series, int firstStep, List<Double> losses) throws IOException {
        XYChart chart = new XYChartBuilder().width(900).height(500).title(title).xAxisTitle("step")
                .yAxisTitle("loss per scored token (cross-entropy, nats)").build();
        List<Double> x = new ArrayList<>();
        for (int i = 0; i < losses.size(); i++) {
            x.add((double) (firstStep + i));
        }
        int window = Math.max(1, losses.size() / 40);
        XYSeries raw = chart.addSeries(series + ", each step", x, losses);
        raw.setMarker(SeriesMarkers.NONE);
        raw.setLineColor(new Color(0x1f, 0x77, 0xb4, 70));
        raw.setLineWidth(1f);
        XYSeries mean = chart.addSeries(series + ", mean of " + window + " steps", x, movingAverage(losses, window));
        mean.setMarker(SeriesMarkers.NONE);
        mean.setLineColor(new Color(0x1f, 0x77, 0xb4));
        mean.setLineWidth(2.5f);
        chart.getStyler().setChartBackgroundColor(Color.WHITE);
        chart.getStyler().setXAxisDecimalPattern("#");
        chart.getStyler().setXAxisTickMarkSpacingHint(120);
        chart.getStyler().setLegendPosition(Styler.LegendPosition.InsideNE);
        Path tmp = dir.resolve(CURVE + ".tmp");
        try (OutputStream o = Files.newOutputStream(tmp)) {
            BitmapEncoder.saveBitmap(chart, o, BitmapEncoder.BitmapFormat.PNG);
        }
        replace(tmp, dir.resolve(CURVE));
    }

    /** The mean of the last {@code window} values at each point (fewer at the start). */
    static List<Double> movingAverage(List<Double> values, int window) {
        List<Double> out = new ArrayList<>();
        double sum = 0;
        for (int i = 0; i < values.size(); i++) {
            sum += values.get(i);
            if (i >= window) {
                sum -= values.get(i - window);
            }
            out.add(sum / Math.min(i + 1, window));
        }
        return out;
    }

    private ObjectNode summary(String status) {
        ObjectNode s = settings.deepCopy();
        s.put("status", status).put("steps_done", stepsDone);
        if (checkpointStep >= 0) {
            s.put("checkpoint_step", checkpointStep);
        } else {
            s.putNull("checkpoint_step");
        }
        if (results != null) {
            s.setAll(results);
        }
        return s;
    }

    private void write(ObjectNode summary) throws IOException {
        writeJson(dir, summary);
    }

    private static void writeJson(Path dir, ObjectNode summary) throws IOException {
        Path tmp = dir.resolve(SUMMARY + ".tmp");
        JSON.writeValue(tmp.toFile(), summary);
        replace(tmp, dir.resolve(SUMMARY));
    }

    private static void replace(Path from, Path to) throws IOException {
        try {
            Files.move(from, to, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        } catch (AtomicMoveNotSupportedException e) {
            Files.move(from, to, StandardCopyOption.REPLACE_EXISTING);
        }
    }
}
