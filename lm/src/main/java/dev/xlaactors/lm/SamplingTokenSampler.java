package dev.xlaactors.lm;

import dev.xlaactors.actors.serve.TokenSampler;
import dev.xlaactors.lm.sampling.Sample;
import dev.xlaactors.lm.sampling.Sampler;
import dev.xlaactors.lm.sampling.SamplingParams;
import dev.xlaactors.lm.sampling.SequenceState;
import java.nio.FloatBuffer;
import java.util.concurrent.ConcurrentLinkedQueue;

/**
 * One request's {@link Sampler} as the generation server calls it ({@link TokenSampler}): its parameters,
 * its sequence state (random generator, tokens so far for the repetition penalty), and the samples it drew
 * in order, with their log-probabilities, for whoever streams the request's tokens ({@link #nextSample()}).
 * The server calls {@link #sample} from its background thread; the samples are read from another thread.
 * The one sampler of serving: the library's generation, the OpenAI routes and the HTTP generate route
 * all draw through it (partial selection, never a full sort of the vocabulary per token).
 */
public final class SamplingTokenSampler implements TokenSampler {
  /**
   * A {@link Sampler} per thread: its scratch buffers are not thread-safe. One shared by every request drew
   * garbage (wrong tokens, or index -1: a 500, found by serve-fuzz) when two generation servers sampled at once.
   */
  private static final ThreadLocal<Sampler> SAMPLER = ThreadLocal.withInitial(Sampler::new);
  private final SamplingParams params;
  private final SequenceState state;
  private final ConcurrentLinkedQueue<Sample> drawn = new ConcurrentLinkedQueue<>();

  /**
   * A sampler of one request drawing as {@code params} say (its seed, or a random one when null), whose
   * repetition penalty counts the tokens of {@code prompt} and of every token drawn.
   */
  public SamplingTokenSampler(SamplingParams params, int[] prompt) {
    this.params = params;
    this.state = SequenceState.create(params, prompt);
  }

  @Override
  public int sample(float[] logits, int offset, int vocabulary) {
    Sample s = SAMPLER.get().sample(FloatBuffer.wrap(logits), offset, vocabulary, params, state);
    drawn.add(s);
    return s.token();
  }

  /** The oldest sample not yet taken: the one of the next token event, in order. Null when none is left. */
  Sample nextSample() {
    return drawn.poll();
  }
}
