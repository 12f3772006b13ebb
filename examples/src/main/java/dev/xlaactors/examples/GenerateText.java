package dev.xlaactors.examples;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.examples.gpt.GptArtifacts;
import dev.xlaactors.examples.gpt.GptModel;
import dev.xlaactors.examples.gpt.GptSampling;
import dev.xlaactors.examples.gpt.GptTokenizer;
import dev.xlaactors.examples.gpt.SamplingSettings;
import dev.xlaactors.examples.gpt.TokenStream;
import dev.xlaactors.runtime.XlaClient;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Behaviors;

/**
 * Text generation with a GPT-2-shaped model (124 M parameters) exported from JAX: GPT-2's tokenizer
 * (JTokkit), the weights memory-mapped from safetensors and uploaded once, prefill, then one decode step
 * per token with the KV cache resident on the device and donated to each step, the next token sampled
 * by a Java host callback inside the decode program, tokens printed as the stream delivers them. Each
 * decode step is a supervised run (CallbackRuntime.startOnDevice): the sampling callback is served by an
 * actor and timed out by {@code xla-actors.actors.callbacks} (e.g. {@code timeouts.sample = 5s}). With
 * greedy sampling (the default) it then asks JAX for its greedy run of the same artifacts and says whether
 * they match token for token.
 *
 * <p>The weights are seeded, not pretrained (no package registry ships GPT-2's): the text is gibberish,
 * the mechanics are the real ones. First use makes the model with tools/jax_gpt.py (about 25 s).
 */
public final class GenerateText {
  private static final String USAGE = "usage: examples/run.sh generate [--max-tokens N>=1] [--temperature T>=0 (0 = greedy)] "
      + "[--top-k K>=0] [--top-p P in (0,1]] [--seed S] [--stop-token ID]... [--no-check] \"prompt\"";

  private GenerateText() {}

  public static void main(String[] args) throws Exception {
    Options o;
    try {
      o = Options.parse(args);
    } catch (IllegalArgumentException e) {
      System.err.println(e.getMessage());
      System.err.println(USAGE);
      System.exit(2);
      return;
    }
    GptTokenizer tokenizer = new GptTokenizer();
    int[] prompt = tokenizer.encode(o.prompt);
    GptArtifacts artifacts = GptArtifacts.ensure(Path.of("").toAbsolutePath(), "gpt2-124m", System.err);
    ActorSystem<Void> system = ActorSystem.create(Behaviors.empty(), "generate");
    int status = 0;
    try (XlaClient client = XlaClient.create();
        CallbackRuntime runtime = CallbackRuntime.create(system, client)) {
      long t0 = System.nanoTime();
      try (GptModel model = GptModel.load(client, artifacts, 1);
          GptSampling sampling = GptSampling.register(runtime, model, system)) {
        System.err.printf("model %s: %.1f MB of weights loaded and programs compiled in %.2f s%n", artifacts.name(),
            artifacts.weightBytes() / 1e6, (System.nanoTime() - t0) / 1e9);
        SamplingSettings settings = new SamplingSettings(o.temperature, o.topK, o.topP, o.stopTokens, o.seed);
        GptTokenizer.Decoder decoder = tokenizer.decoder();
        List<Integer> produced = new ArrayList<>();
        System.out.print(o.prompt);
        System.out.flush();
        long t1 = System.nanoTime();
        TokenStream.tokens(model, prompt, settings, o.maxTokens, sampling)
            .runForeach(token -> {
              produced.add(token);
              System.out.print(decoder.next(token));
              System.out.flush();
            }, system)
            .toCompletableFuture()
            .get(10, TimeUnit.MINUTES);
        double seconds = (System.nanoTime() - t1) / 1e9;
        System.out.println();
        System.err.printf("%d tokens in %.2f s (%.1f tokens/s, prefill included)%n", produced.size(), seconds,
            produced.size() / seconds);
        if (o.temperature == 0 && o.check) {
          status = checkAgainstJax(artifacts, prompt, produced);
        }
      }
    } catch (XlaException e) {
      System.err.println(e.getMessage());
      status = 1;
    } finally {
      system.terminate();
      system.getWhenTerminated().toCompletableFuture().get(10, TimeUnit.SECONDS);
    }
    System.exit(status);
  }

  /** Asks tools/jax_gpt.py for JAX's greedy run of the same artifacts and compares; 0 when they match. */
  private static int checkAgainstJax(GptArtifacts artifacts, int[] prompt, List<Integer> ours) {
    // JAX's run stops only at the length; ours may have stopped earlier at a stop token.
    String tokens = Arrays.stream(prompt).mapToObj(Integer::toString).collect(Collectors.joining(","));
    List<Integer> jax = JaxReference.greedy(artifacts, tokens, ours.size());
    boolean match = jax.equals(ours);
    System.err.println(match ? "greedy tokens match JAX's run of the same artifacts token for token (" + ours.size() + " tokens)"
        : "greedy tokens DIFFER from JAX's: ours " + ours + ", JAX " + jax);
    return match ? 0 : 3;
  }

  /** Runs JAX's greedy decoding of an artifacts directory through tools/jax_gpt.py. */
  static final class JaxReference {
    static List<Integer> greedy(GptArtifacts artifacts, String tokens, int steps) {
      try {
        Path root = Path.of("").toAbsolutePath();
        Process env = new ProcessBuilder("bash", "tools/jax-env.sh").directory(root.toFile()).start();
        String python = new String(env.getInputStream().readAllBytes()).strip();
        env.waitFor();
        Process p = new ProcessBuilder(python, "tools/jax_gpt.py", "greedy", "--dir", artifacts.dir().toString(), "--tokens",
            tokens, "--steps", Integer.toString(steps)).directory(root.toFile()).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        String out = new String(p.getInputStream().readAllBytes());
        if (p.waitFor() != 0) {
          throw new IllegalStateException("tools/jax_gpt.py greedy failed (exit " + p.exitValue() + ")");
        }
        return out.lines().filter(s -> !s.isBlank()).map(s -> Integer.parseInt(s.strip())).toList();
      } catch (java.io.IOException e) {
        throw new java.io.UncheckedIOException(e);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException(e);
      }
    }
  }

  /** The command line, checked. */
  record Options(String prompt, int maxTokens, double temperature, int topK, double topP, long seed, Set<Integer> stopTokens,
      boolean check) {
    static Options parse(String[] args) {
      int maxTokens = 40;
      double temperature = 0;
      int topK = 0;
      double topP = 1;
      long seed = 7;
      Set<Integer> stop = new HashSet<>();
      boolean check = true;
      String prompt = null;
      for (int i = 0; i < args.length; i++) {
        String a = args[i];
        if (!a.startsWith("--")) {
          if (prompt != null) {
            throw new IllegalArgumentException("one prompt expected, got a second one: '" + a + "' (quote the prompt)");
          }
          prompt = a;
          continue;
        }
        if (a.equals("--no-check")) {
          check = false;
          continue;
        }
        if (i + 1 >= args.length) {
          throw new IllegalArgumentException("option " + a + " needs a value");
        }
        String v = args[++i];
        try {
          switch (a) {
            case "--max-tokens" -> maxTokens = Integer.parseInt(v);
            case "--temperature" -> temperature = Double.parseDouble(v);
            case "--top-k" -> topK = Integer.parseInt(v);
            case "--top-p" -> topP = Double.parseDouble(v);
            case "--seed" -> seed = Long.parseLong(v);
            case "--stop-token" -> stop.add(Integer.parseInt(v));
            default -> throw new IllegalArgumentException("unknown option " + a);
          }
        } catch (NumberFormatException e) {
          throw new IllegalArgumentException("option " + a + " takes a number, got '" + v + "'");
        }
      }
      if (prompt == null || prompt.isBlank()) {
        throw new IllegalArgumentException("no prompt: give the text to continue, in quotes");
      }
      if (maxTokens < 1 || !(temperature >= 0) || Double.isInfinite(temperature) || topK < 0 || !(topP > 0 && topP <= 1)) {
        throw new IllegalArgumentException("out of range: max-tokens " + maxTokens + ", temperature " + temperature + ", top-k " + topK
            + ", top-p " + topP);
      }
      for (int s : stop) {
        if (s < 0 || s > GptTokenizer.END_OF_TEXT) {
          throw new IllegalArgumentException("stop token " + s + " is outside GPT-2's vocabulary 0.." + GptTokenizer.END_OF_TEXT);
        }
      }
      if (stop.isEmpty()) {
        stop.add(GptTokenizer.END_OF_TEXT);
      }
      return new Options(prompt, maxTokens, temperature, topK, topP, seed, stop, check);
    }
  }
}
