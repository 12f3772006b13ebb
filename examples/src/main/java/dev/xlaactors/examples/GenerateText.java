package dev.xlaactors.examples;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.actors.serve.GenerationServer;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.examples.gpt.GptPackage;
import dev.xlaactors.lm.LanguageModel;
import dev.xlaactors.lm.PackageSlotDecoder;
import dev.xlaactors.lm.TextGenerator;
import dev.xlaactors.lm.sampling.SamplingParams;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.ModelPackage;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.file.Path;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.stream.IntStream;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.Props;
import org.apache.pekko.actor.typed.javadsl.Behaviors;

/**
 * Text generation with a GPT-2-shaped model (124 M parameters) through the language-model library: the
 * model is a model package ({@link GptPackage}: the seeded weights of tools/jax_gpt.py as a Hugging Face
 * checkpoint, imported by tools/hf_import.py with GPT-2's tokenizer, r50k_base), loaded by
 * {@link LanguageModel} (each weight uploaded once), served by a {@link GenerationServer} over one of its
 * slot decoders (the KV cache resident on the device, donated to each step), and streamed as text by a
 * {@link TextGenerator}: each piece printed as it comes, never half a character. Each step is a supervised
 * run of the {@link CallbackRuntime}; the next token is sampled in Java ({@link SamplingParams}). With
 * greedy sampling (the default) it then asks JAX for its greedy run of the model's own programs (those of
 * tools/jax_gpt.py make) and says whether they match token for token.
 *
 * <p>The weights are seeded, not pretrained (no package registry ships GPT-2's): the text is gibberish,
 * the mechanics are the real ones. First use makes the package with tools/jax_gpt.py (a minute or two).
 */
public final class GenerateText {
  private static final String USAGE = "usage: examples/run.sh generate [--model gpt2-124m|tiny] [--max-tokens N>=1] "
      + "[--temperature T>=0 (0 = greedy)] [--top-k K>=0] [--top-p P in (0,1]] [--seed S] [--stop-token ID]... [--no-check] \"prompt\"";

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
    Path root = Path.of("").toAbsolutePath();
    GptPackage gpt = GptPackage.ensure(root, o.model, System.err);
    ActorSystem<Void> system = ActorSystem.create(Behaviors.empty(), "generate");
    int status = 0;
    try (XlaClient client = XlaClient.create();
        CallbackRuntime runtime = CallbackRuntime.create(system, client)) {
      long t0 = System.nanoTime();
      try (LanguageModel model = LanguageModel.load(ModelPackage.open(gpt.directory()), client.devices().get(0), runtime)) {
        try {
          // One slot: this program generates one sequence. The server owns the decoder (its cache) and closes it.
          PackageSlotDecoder decoder = model.decoder(1);
          System.err.printf("model %s: loaded and compiled in %.2f s (%d-token context, prompts up to %d tokens)%n", model.name(),
              (System.nanoTime() - t0) / 1e9, model.contextLength(), decoder.maxPromptLength());
          ActorRef<GenerationServer.Command> server =
              system.systemActorOf(GenerationServer.create(model.name(), decoder, new SimpleMeterRegistry()), "gpt", Props.empty());
          for (int s : o.stopTokens) {
            if (s >= model.vocabulary()) {
              throw new IllegalArgumentException("stop token " + s + " is outside the vocabulary 0.." + (model.vocabulary() - 1));
            }
          }
          TextGenerator generator = new TextGenerator(model, server, system);
          SamplingParams params = model.defaults().withMaxTokens(o.maxTokens).withTemperature(o.temperature).withTopK(o.topK)
              .withTopP(o.topP).withSeed(o.seed);
          if (!o.stopTokens.isEmpty()) {
            params = params.withStopTokenIds(o.stopTokens); // else the package's end-of-text
          }
          int[] prompt = model.encode(o.prompt);
          System.out.print(o.prompt);
          System.out.flush();
          long t1 = System.nanoTime();
          TextGenerator.Result result = generator.generate(prompt, params, null, piece -> {
            System.out.print(piece.text());
            System.out.flush();
          }).toCompletableFuture().get(10, TimeUnit.MINUTES);
          double seconds = (System.nanoTime() - t1) / 1e9;
          System.out.println();
          System.err.printf("%d tokens in %.2f s (%.1f tokens/s, prefill included), finished by %s%n", result.tokens().length, seconds,
              result.tokens().length / seconds, result.finishReason());
          if (o.temperature == 0 && o.check) {
            status = checkAgainstJax(gpt, root, prompt, result.tokens());
          }
        } finally { // the server closes its decoder when it stops: before the model is closed
          system.terminate();
          system.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS);
        }
      }
    } catch (XlaException | IllegalArgumentException e) {
      System.err.println(e.getMessage());
      status = 1;
    } catch (java.util.concurrent.ExecutionException e) { // the generation failed: the server's error names why
      System.err.println(e.getCause().getMessage());
      status = 1;
    } finally {
      system.terminate();
      system.getWhenTerminated().toCompletableFuture().get(10, TimeUnit.SECONDS);
    }
    System.exit(status);
  }

  /** Asks tools/jax_gpt.py for JAX's greedy run of make's programs and compares; 0 when they match. */
  private static int checkAgainstJax(GptPackage gpt, Path root, int[] prompt, int[] ours) {
    // JAX's run stops only at the length: as many steps as ours took (ours may have stopped at a stop token).
    List<Integer> jax = gpt.jaxGreedy(root, prompt, ours.length);
    List<Integer> mine = IntStream.of(ours).boxed().toList();
    boolean match = jax.equals(mine);
    System.err.println(match ? "greedy tokens match JAX's run of the same weights token for token (" + ours.length + " tokens)"
        : "greedy tokens DIFFER from JAX's: ours " + mine + ", JAX " + jax);
    return match ? 0 : 3;
  }

  /** The command line, checked. */
  record Options(String model, String prompt, int maxTokens, double temperature, int topK, double topP, long seed,
      Set<Integer> stopTokens, boolean check) {
    static Options parse(String[] args) {
      int maxTokens = 40;
      double temperature = 0;
      int topK = 0;
      double topP = 1;
      long seed = 7;
      Set<Integer> stop = new HashSet<>();
      boolean check = true;
      String prompt = null;
      String model = "gpt2-124m";
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
            case "--model" -> model = v;
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
        if (s < 0) {
          throw new IllegalArgumentException("stop token " + s + " is negative: token ids start at 0");
        }
      }
      if (!List.of("gpt2-124m", "tiny").contains(model)) {
        throw new IllegalArgumentException("--model takes gpt2-124m or tiny, got '" + model + "'");
      }
      return new Options(model, prompt, maxTokens, temperature, topK, topP, seed, stop, check);
    }
  }
}
