package dev.xlaactors.examples.gpt;

import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.runtime.DeviceBuffer;
import dev.xlaactors.runtime.HostCall;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.RunContext;
import dev.xlaactors.runtime.model.Argument;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One generation on a {@link GptModel}: the first tokens are sampled from the prefill's logits, then each
 * {@link #next()} runs one decode step, in which XLA calls the Java {@link Sampler} ("sample") with the
 * step's logits. The sampled tokens stay on the device as the next step's input, the KV cache is donated
 * to each step and comes back updated in place; the host sees only the tokens the sampler chose. Steps run
 * at the runtime level, or supervised through a {@link GptSampling} (a CallbackRuntime run per step).
 *
 * <p>A row stops at a stop token (not emitted), after {@code maxTokens} tokens, or at the end of the
 * context. Not thread-safe: one caller pulls tokens (a stream: {@link TokenStream}). Close it to free the
 * cache.
 */
public final class GptGeneration implements AutoCloseable {
  private static final AtomicLong RUN_IDS = new AtomicLong(1L << 40);
  /** How long one sampling call may take before XLA's thread gives up on it (a backstop, never hit normally). */
  private static final Duration SAMPLE_BACKSTOP = Duration.ofSeconds(30);

  private final GptModel model;
  private final Sampler sampler;
  private final int maxTokens;
  private final boolean[] stopped;
  private DeviceBuffer cache;
  private DeviceBuffer deviceTokens; // the last step's sampled tokens, input of the next step
  private int[] lastTokens;
  private int pos; // the position the next decode step writes
  private int produced;
  private volatile int[] sampled; // written by the "sample" callback, on the thread that serves it

  private final GptSampling supervised; // null: steps at the runtime level

  GptGeneration(GptModel model, GptModel.Prefilled prefilled, int promptLength, Sampler sampler, int maxTokens,
      GptSampling supervised) {
    this.model = model;
    this.supervised = supervised;
    this.sampler = sampler;
    this.maxTokens = maxTokens;
    this.stopped = new boolean[model.batch()];
    this.cache = prefilled.cache();
    this.pos = promptLength;
    this.lastTokens = null;
    try {
      this.sampled = sampler.sample(prefilled.logits(), model.batch(), model.vocab());
    } catch (RuntimeException e) {
      prefilled.cache().close(); // no generation is made to close it: the caller never gets one
      throw e;
    }
  }

  /**
   * The next token of each row ({@code -1} for a row that has stopped), or null when every row has stopped.
   */
  public int[] next() {
    if (cache == null) {
      return null;
    }
    if (lastTokens != null) {
      if (produced >= maxTokens || pos >= model.artifacts().ctx()) {
        close();
        return null;
      }
      step();
    }
    int[] out = sampled.clone();
    boolean any = false;
    for (int b = 0; b < out.length; b++) {
      if (stopped[b] || sampler.settings().stopTokens().contains(out[b])) {
        stopped[b] = true;
        out[b] = -1;
      } else {
        any = true;
      }
    }
    lastTokens = sampled;
    produced++;
    if (!any) {
      close();
      return null;
    }
    return out;
  }

  private void step() {
    Argument token = deviceTokens != null ? Argument.of(deviceTokens) : Argument.of(HostTensor.ofInts(lastTokens, lastTokens.length));
    DeviceBuffer donated = cache;
    cache = null; // donated: the step closes it
    List<DeviceBuffer> out;
    try {
      out = supervised != null ? supervised.step(this, token, pos, donated) : stepHere(token, donated);
    } finally {
      if (deviceTokens != null) {
        deviceTokens.close();
        deviceTokens = null;
      }
    }
    deviceTokens = out.get(0);
    cache = out.get(1);
    pos++;
  }

  /** A decode step at the runtime level: "sample" is served on XLA's thread through a run context. */
  private List<DeviceBuffer> stepHere(Argument token, DeviceBuffer donated) {
    try (RunContext context = RunContext.withHostCalls(
        model.client().plugin(), RUN_IDS.incrementAndGet(), this::sample, name -> SAMPLE_BACKSTOP, name -> true)) {
      return model.decodeSample(token, pos, donated, context);
    }
  }

  /**
   * Samples the next token of each row from a decode step's logits ({@code [batch * vocab]}) and keeps them
   * as this generation's next tokens: the body of the "sample" callback, on whichever thread serves it.
   */
  int[] sampleFrom(java.nio.FloatBuffer logits) {
    sampled = sampler.sample(logits, model.batch(), model.vocab());
    return sampled;
  }

  /** The host callback "sample": runs on XLA's thread with the step's logits, lent for the call. */
  private void sample(HostCall call) {
    try {
      if (!call.callbackName().equals("sample")) {
        call.fail(ErrorCode.INVALID_ARGUMENT, "the decode program called '" + call.callbackName() + "', expected 'sample'");
        return;
      }
      int[] tokens = sampleFrom(java.nio.FloatBuffer.wrap(call.inputs().get(0).toFloatArray())); // lent: copied
      call.complete(List.of(HostTensor.ofInts(tokens, tokens.length)));
    } catch (RuntimeException e) {
      call.fail(ErrorCode.INVALID_ARGUMENT, "sampling failed: " + e.getMessage());
    }
  }

  /** The position the next decode step writes (the prompt length plus the tokens decoded so far). */
  public int position() {
    return pos;
  }

  @Override
  public String toString() {
    return "GptGeneration[pos=" + pos + ", produced=" + produced + ", stopped=" + Arrays.toString(stopped) + "]";
  }

  /** Frees the cache and the device tokens; idempotent. */
  @Override
  public void close() {
    if (deviceTokens != null) {
      deviceTokens.close();
      deviceTokens = null;
    }
    if (cache != null) {
      cache.close();
      cache = null;
    }
  }
}
