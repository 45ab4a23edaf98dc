package org.attn4j.samples.train;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import org.attn4j.distributed.training.Packing;
import org.attn4j.ops.Documents;
import org.nd4j.linalg.api.buffer.DataType;
import org.nd4j.linalg.api.ndarray.INDArray;
import org.nd4j.linalg.dataset.DataSet;
import org.nd4j.linalg.factory.Nd4j;

/**
 * What {@code attn4j train} learns: batches of token sequences with next-token labels and a label mask marking
 * the positions that are scored. Two synthetic long-context tasks are generated from a seed at any length, and
 * any UTF-8 text file can be read byte by byte.
 * <pre>
 *   passkey   . , ; . KEY 3 1 4 1 5 ; , . . ; . , . QUERY 3 1 4 1 5     only the answer digits are scored
 *   recall    k3 v7 k1 v2 k5 v0 ... k1 v2 ... QUERY k5 v0                 the value of the queried key
 *   text      bytes of the file, random windows                            every position is scored
 * </pre>
 * Packed sequences: {@link #packed} fills each sequence with several independent samples of a task (documents),
 * {@link #textDocuments} cuts a text into documents and either packs them or pads one per sequence. Their batches
 * carry the document ids ({@link Packing}); a prediction across two documents is not scored.
 * In both synthetic tasks the answer lies anywhere in the sequence, so only attention across the whole
 * sequence can score well: a model that sees a window learns nothing beyond chance.
 */
public abstract class TrainingTask {

    /** The vocabulary size. */
    public abstract int vocab();

    /** A short name for logs. */
    public abstract String name();

    /**
     * One sequence of {@code n + 1} tokens and whether each of the first {@code n} predictions is scored.
     *
     * @param rnd the generator to draw from
     * @param n   the input length
     */
    protected abstract Sample sample(Random rnd, int n);

    /**
     * One sequence: {@code tokens[0..n]}, {@code scored[t]} whether predicting {@code tokens[t+1]} counts, and the
     * document of each of the first n positions (negative = padding), or null for one document.
     */
    protected record Sample(int[] tokens, boolean[] scored, int[] documents) {
        Sample(int[] tokens, boolean[] scored) {
            this(tokens, scored, null);
        }
    }

    /**
     * A batch: features {@code [b, 1, n]} token ids, labels {@code [b, vocab, n]} one-hot of the next token,
     * label mask {@code [b, n]}.
     */
    public DataSet batch(Random rnd, int b, int n, DataType type) {
        INDArray features = Nd4j.zeros(type, b, 1, n);
        INDArray labels = Nd4j.zeros(type, b, vocab(), n);
        INDArray mask = Nd4j.zeros(type, b, n);
        int[][] documents = new int[b][];
        for (int i = 0; i < b; i++) {
            Sample s = sample(rnd, n);
            documents[i] = s.documents();
            for (int t = 0; t < n; t++) {
                features.putScalar(new int[] {i, 0, t}, s.tokens()[t]);
                labels.putScalar(new int[] {i, s.tokens()[t + 1], t}, 1.0);
                mask.putScalar(new int[] {i, t}, s.scored()[t] ? 1.0 : 0.0);
            }
        }
        DataSet ds = new DataSet(features, labels, null, mask);
        return documents[0] == null ? ds : (DataSet) Packing.attach(ds, Documents.of(documents));
    }

    /**
     * Sequences packed with independent samples of {@code inner} (documents of random lengths, each at least
     * {@code minLength} tokens): the passkey task packed, for instance, where each document hides its own key.
     */
    public static TrainingTask packed(TrainingTask inner, int minLength) {
        return new Packed(inner, minLength);
    }

    /**
     * Byte-level language modelling of a text cut into documents at every {@code separator} (empty documents
     * dropped): {@code pack} fills each sequence with consecutive documents from a random one on (the last one
     * cut at the sequence's end); otherwise each sequence holds the start of one document, padded.
     *
     * @throws IOException if the file cannot be read
     * @throws IllegalArgumentException if the text holds no document
     */
    public static TrainingTask textDocuments(Path file, String separator, boolean pack) throws IOException {
        String text = Files.readString(file, java.nio.charset.StandardCharsets.UTF_8);
        List<byte[]> docs = new ArrayList<>();
        for (String part : separator == null ? text.split("\\R[ \\t]*\\R\\s*") : text.split(
                java.util.regex.Pattern.quote(separator))) {
            if (!part.isBlank()) {
                docs.add(part.strip().getBytes(java.nio.charset.StandardCharsets.UTF_8));
            }
        }
        if (docs.isEmpty()) {
            throw new IllegalArgumentException("text file " + file + " holds no document (" + (separator == null
                    ? "documents are separated by blank lines" : "separator '" + separator + "'") + ")");
        }
        return new TextDocuments(file.getFileName().toString(), docs, pack);
    }

    /** The passkey task: remember digits seen once, anywhere, and repeat them after the query marker. */
    public static TrainingTask passkey(int digits) {
        return new Passkey(digits);
    }

    /** Associative recall: key-value pairs, then a key; answer its value. */
    public static TrainingTask recall(int keys) {
        return new Recall(keys);
    }

    /**
     * Byte-level language modelling of a UTF-8 text file (vocabulary 256).
     *
     * @throws IOException if the file cannot be read
     * @throws IllegalArgumentException if it is shorter than {@code minLength + 1} bytes
     */
    public static TrainingTask text(Path file, int minLength) throws IOException {
        byte[] bytes = Files.readAllBytes(file);
        if (bytes.length < minLength + 1) {
            throw new IllegalArgumentException("text file " + file + " has " + bytes.length + " bytes; a sequence of "
                    + minLength + " needs at least " + (minLength + 1));
        }
        return new Text(bytes);
    }

    private static final class Passkey extends TrainingTask {
        private static final int FILLERS = 3;
        private static final int KEY = 10 + FILLERS;
        private static final int QUERY = KEY + 1;
        private final int digits;

        Passkey(int digits) {
            this.digits = digits;
        }

        @Override
        public int vocab() {
            return QUERY + 1;
        }

        @Override
        public String name() {
            return "passkey (" + digits + " digits)";
        }

        @Override
        protected Sample sample(Random rnd, int n) {
            if (n < 2 * digits + 3) {
                throw new IllegalArgumentException("passkey needs a sequence of at least " + (2 * digits + 3)
                        + " tokens, got " + n);
            }
            int[] tok = new int[n + 1];
            for (int t = 0; t <= n; t++) {
                tok[t] = 10 + rnd.nextInt(FILLERS);
            }
            int[] key = new int[digits];
            for (int d = 0; d < digits; d++) {
                key[d] = rnd.nextInt(10);
            }
            int answerStart = n + 1 - digits;                     // the last `digits` tokens
            int at = rnd.nextInt(answerStart - 1 - digits - 1 + 1);
            tok[at] = KEY;
            System.arraycopy(key, 0, tok, at + 1, digits);
            tok[answerStart - 1] = QUERY;
            System.arraycopy(key, 0, tok, answerStart, digits);
            boolean[] scored = new boolean[n];
            for (int t = answerStart - 1; t < n; t++) {
                scored[t] = true;                                  // predicting tokens answerStart .. n
            }
            return new Sample(tok, scored);
        }
    }

    private static final class Recall extends TrainingTask {
        private final int keys;

        Recall(int keys) {
            this.keys = keys;
        }

        @Override
        public int vocab() {
            return 2 * keys + 1;
        }

        @Override
        public String name() {
            return "associative recall (" + keys + " keys)";
        }

        @Override
        protected Sample sample(Random rnd, int n) {
            if (n < 4) {
                throw new IllegalArgumentException("recall needs a sequence of at least 4 tokens, got " + n);
            }
            int query = 2 * keys;
            int[] value = new int[keys];
            for (int k = 0; k < keys; k++) {
                value[k] = keys + rnd.nextInt(keys);
            }
            // seq[0 .. n-3]: key, value pairs (a value token pads an odd length); seq[n-2] the query marker,
            // seq[n-1] a key shown before, seq[n] its value: the one scored prediction.
            int[] seq = new int[n + 1];
            int pairs = (n - 2) / 2;
            int[] shown = new int[pairs];
            for (int p = 0; p < pairs; p++) {
                shown[p] = rnd.nextInt(keys);
                seq[2 * p] = shown[p];
                seq[2 * p + 1] = value[shown[p]];
            }
            for (int t = 2 * pairs; t < n - 2; t++) {
                seq[t] = keys + rnd.nextInt(keys);
            }
            int asked = shown[rnd.nextInt(pairs)];
            seq[n - 2] = query;
            seq[n - 1] = asked;
            seq[n] = value[asked];
            boolean[] scored = new boolean[n];
            scored[n - 1] = true;
            return new Sample(seq, scored);
        }
    }

    private static final class Packed extends TrainingTask {
        private final TrainingTask inner;
        private final int minLength;

        Packed(TrainingTask inner, int minLength) {
            this.inner = inner;
            this.minLength = minLength;
        }

        @Override
        public int vocab() {
            return inner.vocab();
        }

        @Override
        public String name() {
            return inner.name() + ", packed";
        }

        @Override
        protected Sample sample(Random rnd, int n) {
            if (n + 1 < 2 * minLength) {
                throw new IllegalArgumentException("a packed " + inner.name() + " needs sequences of at least "
                        + (2 * minLength - 1) + " tokens (two documents of " + minLength + "), got " + n);
            }
            int[] tok = new int[n + 1];
            boolean[] scored = new boolean[n];
            int[] ids = new int[n];
            int at = 0;
            int id = 0;
            while (at < n + 1) {
                int left = n + 1 - at;
                int len = left < 2 * minLength ? left : minLength + rnd.nextInt(Math.max(1, left / 2 - minLength + 1));
                Sample s = inner.sample(rnd, len - 1);             // len tokens, len - 1 predictions
                System.arraycopy(s.tokens(), 0, tok, at, len);
                for (int t = 0; t < len && at + t < n; t++) {
                    ids[at + t] = id;
                    scored[at + t] = t < len - 1 && s.scored()[t];  // not across into the next document
                }
                at += len;
                id++;
            }
            return new Sample(tok, scored, ids);
        }
    }

    private static final class TextDocuments extends TrainingTask {
        private final String file;
        private final List<byte[]> docs;
        private final boolean pack;

        TextDocuments(String file, List<byte[]> docs, boolean pack) {
            this.file = file;
            this.docs = docs;
            this.pack = pack;
        }

        @Override
        public int vocab() {
            return 256;
        }

        @Override
        public String name() {
            return "text (" + docs.size() + " documents of " + file + ", " + (pack ? "packed" : "padded") + ")";
        }

        @Override
        protected Sample sample(Random rnd, int n) {
            int[] tok = new int[n + 1];
            int[] doc = new int[n + 1];
            java.util.Arrays.fill(doc, -1);
            int at = 0;
            int d = rnd.nextInt(docs.size());
            for (int id = 0; at < n + 1 && (pack || id == 0); id++) {
                byte[] bytes = docs.get((d + id) % docs.size());
                for (int i = 0; i < bytes.length && at < n + 1; i++, at++) {
                    tok[at] = bytes[i] & 0xff;
                    doc[at] = id;
                }
            }
            boolean[] scored = new boolean[n];
            for (int t = 0; t < n; t++) {
                scored[t] = doc[t] >= 0 && doc[t] == doc[t + 1];
            }
            return new Sample(tok, scored, java.util.Arrays.copyOf(doc, n));
        }
    }

    private static final class Text extends TrainingTask {
        private final byte[] bytes;

        Text(byte[] bytes) {
            this.bytes = bytes;
        }

        @Override
        public int vocab() {
            return 256;
        }

        @Override
        public String name() {
            return "text (" + bytes.length + " bytes)";
        }

        @Override
        protected Sample sample(Random rnd, int n) {
            if (bytes.length < n + 1) {
                throw new IllegalArgumentException("text of " + bytes.length + " bytes is shorter than a sequence of "
                        + (n + 1));
            }
            int start = rnd.nextInt(bytes.length - n);
            int[] tok = new int[n + 1];
            for (int t = 0; t <= n; t++) {
                tok[t] = bytes[start + t] & 0xff;
            }
            boolean[] scored = new boolean[n];
            java.util.Arrays.fill(scored, true);
            return new Sample(tok, scored);
        }
    }
}
