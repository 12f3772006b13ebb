package dev.xlaactors.lm.sampling;

import java.util.Arrays;

/**
 * The {@code k} highest of {@code n} values, best first (ties: lower index first), in
 * {@code O(n log k)} with a bounded max-heap of {@code k} keys: a sampler cuts to the few tokens it can
 * draw without sorting the whole vocabulary. Each key packs the value's order (high 32 bits, inverted so
 * that smaller is better) and the index (low 32 bits), so comparisons are on one {@code long} and nothing
 * is boxed. Values must not be NaN. Keeps its heap between calls; not thread-safe.
 */
final class TopKSelector {
  private long[] heap = new long[64];

  /**
   * Writes the indices of the {@code k} highest of {@code values[0..n)} into {@code out}, best first, and
   * returns how many were written ({@code min(k, n)}).
   */
  int select(float[] values, int n, int k, int[] out) {
    k = Math.min(k, n);
    if (heap.length < k) {
      heap = new long[Math.max(k, heap.length * 2)];
    }
    int size = 0;
    // Once the heap is full, a value below its worst cannot enter: one float comparison skips most of a row.
    float worst = Float.NEGATIVE_INFINITY;
    for (int i = 0; i < n; i++) {
      float value = values[i];
      if (size == k && value < worst) {
        continue;
      }
      long key = rank(value, i);
      if (size < k) {
        heap[size] = key;
        siftUp(size++);
        if (size == k) {
          worst = valueOf(heap[0]);
        }
      } else if (key < heap[0]) {
        heap[0] = key;
        siftDown(k);
        worst = valueOf(heap[0]);
      }
    }
    Arrays.sort(heap, 0, size);
    for (int i = 0; i < size; i++) {
      out[i] = (int) heap[i];
    }
    return size;
  }

  /** A token's rank as one {@code long}: smaller = higher value, then lower index (a total order). */
  static long rank(float value, int index) {
    int bits = Float.floatToIntBits(value);
    int ascending = bits ^ ((bits >> 31) & 0x7fffffff); // a signed int that orders like the float
    return ((long) ~ascending << 32) | index;
  }

  /** The value a {@link #rank} was made from. */
  static float valueOf(long rank) {
    int ascending = ~(int) (rank >>> 32);
    return Float.intBitsToFloat(ascending ^ ((ascending >> 31) & 0x7fffffff));
  }

  private void siftUp(int i) {
    while (i > 0) {
      int parent = (i - 1) >>> 1;
      if (heap[parent] >= heap[i]) {
        return;
      }
      swap(parent, i);
      i = parent;
    }
  }

  private void siftDown(int size) {
    int i = 0;
    while (true) {
      int left = 2 * i + 1;
      int largest = i;
      if (left < size && heap[left] > heap[largest]) {
        largest = left;
      }
      if (left + 1 < size && heap[left + 1] > heap[largest]) {
        largest = left + 1;
      }
      if (largest == i) {
        return;
      }
      swap(largest, i);
      i = largest;
    }
  }

  private void swap(int a, int b) {
    long t = heap[a];
    heap[a] = heap[b];
    heap[b] = t;
  }
}
