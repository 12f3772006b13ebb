package dev.xlaactors.examples.gpt;

import dev.xlaactors.error.InvalidArgumentException;
import java.nio.FloatBuffer;
import java.util.Arrays;
import java.util.SplittableRandom;

/**
 * Draws one token per batch row from a step's logits ({@code [batch, vocab]}, row-major) by
 * {@link SamplingSettings}. It is the body of the decode program's host callback "sample", so it runs on
 * the XLA thread in the middle of each step. One sampler per generation (its RNG is the generation's);
 * not thread-safe.
 */
public final class Sampler {
  private final SamplingSettings settings;
  private final SplittableRandom random;
  private int[] order = new int[0];
  private double[] weights = new double[0];

  public Sampler(SamplingSettings settings) {
    this.settings = settings;
    this.random = new SplittableRandom(settings.seed());
  }

  /** The settings this sampler draws by. */
  public SamplingSettings settings() {
    return settings;
  }

  /** One token per row of {@code logits}, which holds {@code batch} rows of {@code vocab} values. */
  public int[] sample(float[] logits, int batch, int vocab) {
    return sample(FloatBuffer.wrap(logits), batch, vocab);
  }

  /**
   * As {@link #sample(float[], int, int)}, reading {@code logits} from index 0 in place (e.g. a callback
   * input's {@code data().asFloatBuffer()}: no copy of the {@code batch x vocab} values onto the heap).
   */
  public int[] sample(FloatBuffer logits, int batch, int vocab) {
    if (batch < 1 || vocab < 1 || (long) batch * vocab != logits.limit()) {
      throw new InvalidArgumentException("logits hold " + logits.limit() + " values, expected batch " + batch + " x vocab " + vocab);
    }
    int[] out = new int[batch];
    for (int b = 0; b < batch; b++) {
      out[b] = sampleRow(logits, b * vocab, vocab);
    }
    return out;
  }

  private int sampleRow(FloatBuffer logits, int from, int vocab) {
    int best = 0;
    float bestValue = logits.get(from);
    for (int i = 0; i < vocab; i++) {
      float x = logits.get(from + i);
      if (Float.isNaN(x)) {
        throw new InvalidArgumentException("logit " + i + " is NaN: the model produced no distribution to sample from");
      }
      if (x > bestValue) {
        best = i;
        bestValue = x;
      }
    }
    if (settings.temperature() == 0) {
      return best;
    }
    int k = settings.topK() == 0 ? vocab : Math.min(settings.topK(), vocab);
    long[] keys = topKeys(logits, from, vocab, k);
    if (weights.length < k) {
      order = new int[k];
      weights = new double[k];
    }
    for (int i = 0; i < k; i++) {
      order[i] = (int) keys[i];
    }
    double max = logits.get(from + order[0]);
    double sum = 0;
    for (int i = 0; i < k; i++) {
      weights[i] = Math.exp((logits.get(from + order[i]) - max) / settings.temperature());
      sum += weights[i];
    }
    // Top-p: the smallest prefix whose probability reaches topP (at least one token).
    int n = k;
    if (settings.topP() < 1) {
      double cumulative = 0;
      for (int i = 0; i < k; i++) {
        cumulative += weights[i] / sum;
        if (cumulative >= settings.topP()) {
          n = i + 1;
          break;
        }
      }
    }
    double total = 0;
    for (int i = 0; i < n; i++) {
      total += weights[i];
    }
    double r = random.nextDouble() * total;
    for (int i = 0; i < n; i++) {
      r -= weights[i];
      if (r < 0) {
        return order[i];
      }
    }
    return order[n - 1];
  }

  /**
   * The {@code k} highest logits of a row as sort keys, best first: the high half orders by descending
   * logit, the low half is the token id (so ties put the lower id first and the key gives back the id).
   * A bounded max-heap of the k smallest keys: O(vocab log k) and no boxing on the sampling hot path.
   */
  private static long[] topKeys(FloatBuffer logits, int from, int vocab, int k) {
    long[] heap = new long[k];
    int size = 0;
    for (int i = 0; i < vocab; i++) {
      int bits = Float.floatToIntBits(logits.get(from + i));
      int ascending = bits ^ ((bits >> 31) & 0x7fffffff); // orders like the float, as a signed int
      long key = ((long) ~ascending << 32) | i;
      if (size < k) {
        heap[size] = key;
        siftUp(heap, size++);
      } else if (key < heap[0]) {
        heap[0] = key;
        siftDown(heap, k);
      }
    }
    Arrays.sort(heap, 0, size);
    return heap;
  }

  private static void siftUp(long[] heap, int i) {
    while (i > 0) {
      int parent = (i - 1) / 2;
      if (heap[parent] >= heap[i]) {
        return;
      }
      long t = heap[parent];
      heap[parent] = heap[i];
      heap[i] = t;
      i = parent;
    }
  }

  private static void siftDown(long[] heap, int size) {
    int i = 0;
    while (true) {
      int l = 2 * i + 1;
      int r = l + 1;
      int largest = i;
      if (l < size && heap[l] > heap[largest]) {
        largest = l;
      }
      if (r < size && heap[r] > heap[largest]) {
        largest = r;
      }
      if (largest == i) {
        return;
      }
      long t = heap[largest];
      heap[largest] = heap[i];
      heap[i] = t;
      i = largest;
    }
  }
}
