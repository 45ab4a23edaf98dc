package org.attn4j.samples.train;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Random;

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

    /** One sequence: {@code tokens[0..n]}, {@code scored[t]} whether predicting {@code tokens[t+1]} counts. */
    protected record Sample(int[] tokens, boolean[] scored) {
    }

    /**
     * A batch: features {@code [b, 1, n]} token ids, labels {@code [b, vocab, n]} one-hot of the next token,
     * label mask {@code [b, n]}.
     */
    public DataSet batch(Random rnd, int b, int n, DataType type) {
        INDArray features = Nd4j.zeros(type, b, 1, n);
        INDArray labels = Nd4j.zeros(type, b, vocab(), n);
        INDArray mask = Nd4j.zeros(type, b, n);
        for (int i = 0; i < b; i++) {
            Sample s = sample(rnd, n);
            for (int t = 0; t < n; t++) {
                features.putScalar(new int[] {i, 0, t}, s.tokens()[t]);
                labels.putScalar(new int[] {i, s.tokens()[t + 1], t}, 1.0);
                mask.putScalar(new int[] {i, t}, s.scored()[t] ? 1.0 : 0.0);
            }
        }
        return new DataSet(features, labels, null, mask);
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
