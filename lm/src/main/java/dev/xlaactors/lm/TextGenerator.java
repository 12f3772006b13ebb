package dev.xlaactors.lm;

import dev.xlaactors.actors.serve.GenerationServer;
import dev.xlaactors.lm.sampling.Sample;
import dev.xlaactors.lm.sampling.SamplingParams;
import dev.xlaactors.lm.text.IncrementalDetokenizer;
import dev.xlaactors.lm.text.StopStringMatcher;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.function.Consumer;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.stream.KillSwitches;
import org.apache.pekko.stream.UniqueKillSwitch;
import org.apache.pekko.stream.javadsl.Keep;
import org.apache.pekko.stream.javadsl.Sink;

/**
 * Text generation over a {@link GenerationServer} that serves a {@link LanguageModel}: a request is a prompt
 * and {@link SamplingParams}; its text streams as it is decoded, never splitting a character across pieces
 * ({@link IncrementalDetokenizer}), and ends at a stop token, a stop string (matched on the text, across
 * token boundaries; the stop string is not part of the text unless {@link TextOptions} asks for it), {@code maxTokens} or a full context.
 *
 * <p>The server schedules (continuous batching, deadlines, backpressure) and runs each step as a
 * supervised run; this class only turns tokens into text. Thread-safe: each request has its own state.
 */
public final class TextGenerator {
  /** Why a generation ended, as OpenAI's {@code finish_reason} says it. */
  public enum FinishReason {
    /** A stop token or a stop string. */
    STOP,
    /** {@code maxTokens} tokens, or the model's context is full. */
    LENGTH
  }

  /**
   * One generated token as it streams: the text it makes safe to show ({@code ""} while a character or a
   * possible stop string is held back), its id and its sample (log-probabilities). The text held back to
   * the end comes last as a piece of its own, with token -1 and no sample.
   */
  public record Piece(String text, int token, Sample sample) {}

  /**
   * How a generation's tokens become text: {@code skipSpecialTokens} leaves special tokens (end-of-text,
   * chat markers) out of it; {@code includeStopString} ends the text with the stop string that stopped it
   * (vLLM's {@code include_stop_str_in_output}) instead of just before it.
   */
  public record TextOptions(boolean skipSpecialTokens, boolean includeStopString) {
    /** Special tokens left out, the stop string too: what OpenAI answers. */
    public static final TextOptions DEFAULT = new TextOptions(true, false);
  }

  /** A finished generation: the prompt's and the generated token ids, the whole text, why it ended, the samples. */
  public record Result(int[] promptTokens, int[] tokens, String text, FinishReason finishReason, List<Sample> samples) {}

  private final LanguageModel model;
  private final ActorRef<GenerationServer.Command> server;
  private final ActorSystem<?> system;

  /** Generation by {@code server}, a generation server over a decoder of {@code model}; streams run on {@code system}. */
  public TextGenerator(LanguageModel model, ActorRef<GenerationServer.Command> server, ActorSystem<?> system) {
    this.model = model;
    this.server = server;
    this.system = system;
  }

  /** The model whose text this generates. */
  public LanguageModel model() {
    return model;
  }

  /** {@link #generate(int[], SamplingParams, Duration, Consumer)} of the prompt text {@code prompt} ({@link LanguageModel#encode}). */
  public CompletionStage<Result> generate(String prompt, SamplingParams params, Duration timeout, Consumer<Piece> onPiece) {
    return generate(model.encode(prompt), params, timeout, onPiece);
  }

  /**
   * Generates after the token ids {@code prompt} with {@code params} (stop tokens as given: merge the
   * model's end-of-sequence ids with {@link LanguageModel#defaults()} to stop at them), within {@code timeout}
   * (null: the server's default). {@code onPiece} gets each token in order, on a stream thread; the result
   * completes after the last, or fails with the request's error. Cancelling the returned future
   * ({@code toCompletableFuture().cancel(true)}, e.g. when the client went away) cancels the generation:
   * its server drops it, waiting or decoding, and no more pieces come.
   */
  public CompletionStage<Result> generate(int[] prompt, SamplingParams params, Duration timeout, Consumer<Piece> onPiece) {
    return generate(prompt, params, timeout, TextOptions.DEFAULT, onPiece);
  }

  /** {@link #generate(int[], SamplingParams, Duration, Consumer)} with its text made as {@code text} says. */
  public CompletionStage<Result> generate(int[] prompt, SamplingParams params, Duration timeout, TextOptions text,
      Consumer<Piece> onPiece) {
    SamplingTokenSampler sampler = new SamplingTokenSampler(params, prompt);
    Request request = new Request(prompt, params, text, sampler, onPiece);
    var run = GenerationServer.events(server, prompt, params.maxTokens(), params.stopTokenIds(), sampler, timeout)
        .viaMat(KillSwitches.single(), Keep.right())
        .toMat(Sink.foreach(request::on), Keep.both())
        .run(system);
    request.kill = run.first();
    run.second().whenComplete((done, error) -> request.ended(error));
    request.result.whenComplete((r, error) -> {
      if (error instanceof java.util.concurrent.CancellationException) {
        request.stop(); // the caller cancelled: end the stream, which frees the slot
      }
    });
    return request.result;
  }

  /** One request's text state; its events arrive one at a time, on the stream's thread. */
  private final class Request {
    private final int[] prompt;
    private final SamplingTokenSampler sampler;
    private final Consumer<Piece> onPiece;
    private final IncrementalDetokenizer detokenizer;
    private final StopStringMatcher stops;
    private final boolean includeStopString;
    private final StringBuilder text = new StringBuilder();
    private final List<Integer> tokens = new ArrayList<>();
    private final List<Sample> samples = new ArrayList<>();
    private final CompletableFuture<Result> result = new CompletableFuture<>();
    private volatile UniqueKillSwitch kill;

    Request(int[] prompt, SamplingParams params, TextOptions options, SamplingTokenSampler sampler, Consumer<Piece> onPiece) {
      this.prompt = prompt.clone();
      this.sampler = sampler;
      this.onPiece = onPiece;
      this.detokenizer = IncrementalDetokenizer.create(model.tokenizer(), prompt, options.skipSpecialTokens());
      this.stops = new StopStringMatcher(params.stopStrings());
      this.includeStopString = options.includeStopString();
    }

    void on(GenerationServer.Event event) {
      if (result.isDone()) {
        return; // stopped by a stop string: what the server still sends is not this request's any more
      }
      try {
        handle(event);
      } catch (RuntimeException e) { // the caller's onPiece threw: the request ends with its error
        result.completeExceptionally(e);
        stop();
      }
    }

    /** The stream ended: normally after the final event, else with {@code error} or (never expected) without an answer. */
    void ended(Throwable error) {
      if (!result.isDone()) {
        result.completeExceptionally(error != null ? error : new IllegalStateException("the generation server of model '"
            + model.name() + "' ended the request without a final event"));
      }
    }

    private void stop() {
      UniqueKillSwitch k = kill;
      if (k != null) {
        k.shutdown(); // ends the stream, which cancels the generation and frees its slot
      }
    }

    private void handle(GenerationServer.Event event) {
      if (event instanceof GenerationServer.Token t) {
        Sample sample = sampler.nextSample();
        tokens.add(t.token());
        samples.add(sample);
        StopStringMatcher.Output out = stops.append(detokenizer.next(t.token()));
        String shown = shown(out);
        text.append(shown);
        onPiece.accept(new Piece(shown, t.token(), sample));
        if (out.stopped()) {
          finish(FinishReason.STOP, false);
          stop();
        }
      } else if (event instanceof GenerationServer.Finished f) {
        finish(f.reason() == GenerationServer.Reason.STOP_TOKEN ? FinishReason.STOP : FinishReason.LENGTH, true);
      } else if (event instanceof GenerationServer.Failed f) {
        result.completeExceptionally(f.error());
      }
    }

    /** The text of {@code out} to show: with the stop string that ended it when the request asked for it. */
    private String shown(StopStringMatcher.Output out) {
      return includeStopString && out.stopped() ? out.text() + out.stopString().get() : out.text();
    }

    private void finish(FinishReason reason, boolean flush) {
      if (flush) {
        StopStringMatcher.Output out = stops.append(detokenizer.finish());
        String rest = shown(out) + (out.stopped() ? "" : stops.finish());
        if (out.stopped()) {
          reason = FinishReason.STOP;
        }
        if (!rest.isEmpty()) {
          text.append(rest);
          onPiece.accept(new Piece(rest, -1, null));
        }
      }
      result.complete(new Result(prompt, tokens.stream().mapToInt(Integer::intValue).toArray(), text.toString(), reason,
          List.copyOf(samples)));
    }
  }
}
