package dev.xlaactors.bench;

import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.lm.LanguageModel;
import dev.xlaactors.lm.PackageSlotDecoder;
import dev.xlaactors.lm.sampling.Sampler;
import dev.xlaactors.lm.sampling.SamplingParams;
import dev.xlaactors.lm.sampling.SequenceState;
import dev.xlaactors.runtime.Device;
import dev.xlaactors.runtime.DeviceBuffer;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.ModelPackage;
import dev.xlaactors.runtime.model.WeightFiles;
import java.nio.FloatBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Behaviors;

/**
 * Java's side of {@code bench/run.sh models} on the model package of {@code tools/jax_gpt.py package}
 * (the 124 M GPT, as the examples run it), whose programs {@code tools/jax_gpt.py bench --package} runs
 * on JAX's side: the same files, the same weights. Measured: time to load the weights (memory-map the
 * safetensors file and upload every tensor), prefill of a full prompt (128 tokens) into one slot, and
 * decode tokens/s with every slot of each exported slot count busy, the next tokens sampled on the host
 * (temperature 0.8, top-k 40, as JAX's side) from the step's logits; each step a supervised run of the
 * library's slot decoder ({@link PackageSlotDecoder}, the KV cache donated), as a GenerationServer runs
 * it. Then the peak RSS (VmHWM) after each slot count (the smallest one: load and serve one sequence) and at
 * the end, and the resident memory itemised at points ({@link ProcessMemory}: JVM start, client created,
 * model loaded, each slot count's cache made, after its first prefill, after its decode): where the fixed
 * overhead is. Prints one
 * JSON line with the same keys as {@code tools/jax_gpt.py bench}, plus {@code memory} (the points), {@code
 * plugin} (the loaded PJRT plugin's build: {@code XLA_ACTORS_PLUGIN_BUILD} when set, else its file's name)
 * and {@code plugin_api} (its PJRT C API version).
 *
 * <p>Usage: {@code ModelsBench <package dir> [reps] [steps] [prompt] [long prompt]}. {@code prompt} (default: the
 * longest prompt the package takes, which for a package that prefills by chunks is its whole context) is the
 * prompt length of the prefill and decode rows, capped by {@link #promptLength} so that the decode steps fit in
 * the context. {@code long prompt} adds {@code prefill_long_ms}: a prompt of that many tokens into slot 0 of the
 * smallest slot count, timed as the prefill row ({@code bench/run.sh llamacpp}'s 2,000 tokens), or {@code
 * prefill_long_refused} with the decoder's message when the package does not take it.
 */
public final class ModelsBench {
  private ModelsBench() {}

  public static void main(String[] args) throws Exception {
    List<ProcessMemory> memory = new ArrayList<>();
    memory.add(ProcessMemory.at("jvm", null, Set.of()));
    ModelPackage pkg = ModelPackage.open(Path.of(args[0]));
    int reps = args.length > 1 ? Integer.parseInt(args[1]) : 5;
    int steps = args.length > 2 ? Integer.parseInt(args[2]) : 32;
    int promptArg = args.length > 3 ? Integer.parseInt(args[3]) : Integer.MAX_VALUE;
    int longPrompt = args.length > 4 ? Integer.parseInt(args[4]) : 0;
    StringBuilder json = new StringBuilder("{");
    ActorSystem<Void> system = ActorSystem.create(Behaviors.empty(), "models-bench");
    long weightBytes = 0;
    try {
      weightBytes = measure(pkg, reps, steps, promptArg, longPrompt, system, json, memory);
    } finally {
      // Also when a measurement throws: the actor system's threads would otherwise keep the JVM alive after main.
      system.terminate();
      system.getWhenTerminated().toCompletableFuture().get(10, TimeUnit.SECONDS);
    }
    json.append(", \"peak_rss_all_bytes\": ").append(ProcessMemory.peakResidentBytes());
    json.append(", \"weights_bytes\": ").append(weightBytes);
    json.append(", \"memory\": [").append(String.join(", ", memory.stream().map(ProcessMemory::json).toList())).append("]}");
    System.out.println(json);
  }

  /**
   * The measurements of {@link #main} on {@code system}: appends the rows to {@code json} and the memory points to
   * {@code memory}; returns the bytes of the package's weight files.
   */
  private static long measure(ModelPackage pkg, int reps, int steps, int promptArg, int longPrompt, ActorSystem<Void> system,
      StringBuilder json, List<ProcessMemory> memory) throws Exception {
    long weightBytes = 0;
    try (XlaClient client = XlaClient.create(LanguageModel.clientSettings());
        CallbackRuntime runtime = CallbackRuntime.create(system, client)) {
      Device device = client.devices().get(0);
      Path plugin = client.plugin().path();
      Set<Path> weightPaths = Set.copyOf(weightFiles(pkg));
      String build = System.getenv("XLA_ACTORS_PLUGIN_BUILD");
      json.append("\"plugin\": \"").append(build == null || build.isBlank() ? plugin.getFileName() : build.trim())
          .append("\", \"plugin_api\": \"").append(client.plugin().apiVersion()).append("\", ");
      memory.add(ProcessMemory.at("client", plugin, weightPaths));
      List<Double> loads = new ArrayList<>();
      for (int r = 0; r < reps; r++) {
        long t0 = System.nanoTime();
        List<DeviceBuffer> w = uploadWeights(client, pkg, device);
        loads.add((System.nanoTime() - t0) / 1e6);
        w.forEach(DeviceBuffer::close);
        System.gc(); // the JDK unmaps a closed file's mappings when their buffers are collected
      }
      json.append("\"load_ms\": ").append(stats(loads));
      for (Path f : weightFiles(pkg)) {
        weightBytes += Files.size(f);
      }
      SamplingParams sampling = SamplingParams.defaults().withTemperature(0.8).withTopK(40).withSeed(1L).withStopTokenIds(Set.of());
      try (LanguageModel model = LanguageModel.load(pkg, device, runtime)) { // one upload of the weights for every slot count
        memory.add(ProcessMemory.at("loaded", plugin, weightPaths));
        List<Integer> slotCounts = model.slotCounts();
        for (int slots : slotCounts) {
          try (PackageSlotDecoder decoder = model.decoder(slots)) {
            memory.add(ProcessMemory.at("cache_s" + slots, plugin, weightPaths));
            int t = promptLength(promptArg, decoder.maxPromptLength(), decoder.contextLength(), steps);
            int v = decoder.vocabulary();
            int[] prompt = new int[t];
            for (int i = 0; i < t; i++) {
              prompt[i] = i % v;
            }
            Sampler sampler = new Sampler();
            // A decoder of chunked programs (one cache of N slots) decodes 1 of its N sequences with its batch-1
            // programs: that is what one user of a server of N slots gets, reported as the 1-sequence row.
            List<Integer> activeCounts = slotCounts.size() == 1 && slots > 1 ? List.of(1, slots) : List.of(slots);
            for (int running : activeCounts) {
              List<Double> prefill = new ArrayList<>();
              List<Double> tokensPerSecond = new ArrayList<>();
              for (int r = 0; r < reps + 1; r++) { // the first repetition warms up
                long t0 = System.nanoTime();
                decoder.prefill(0, prompt);
                double prefillMs = (System.nanoTime() - t0) / 1e6;
                if (r == 0 && running == activeCounts.get(0)) { // the first run of the prefill program: what it leaves resident
                  memory.add(ProcessMemory.at("prefilled_s" + slots, plugin, weightPaths));
                }
                for (int s = 1; s < running; s++) {
                  decoder.prefill(s, prompt);
                }
                int[] tokens = new int[slots];
                int[] positions = new int[slots];
                boolean[] active = new boolean[slots];
                Arrays.fill(positions, 0, running, t);
                Arrays.fill(active, 0, running, true);
                SequenceState[] states = new SequenceState[slots];
                for (int s = 0; s < slots; s++) {
                  states[s] = SequenceState.create(sampling);
                }
                long t1 = System.nanoTime();
                for (int step = 0; step < steps; step++) {
                  FloatBuffer logits = FloatBuffer.wrap(decoder.decode(tokens, positions, active));
                  for (int s = 0; s < running; s++) {
                    tokens[s] = sampler.sample(logits, s * v, v, sampling, states[s]).token();
                    positions[s]++;
                  }
                }
                double seconds = (System.nanoTime() - t1) / 1e9;
                if (r > 0) {
                  prefill.add(prefillMs);
                  tokensPerSecond.add(running * steps / seconds);
                }
              }
              if (running == activeCounts.get(0) && slots == slotCounts.get(0)) {
                json.append(", \"prompt_tokens\": ").append(t);
              }
              json.append(", \"prefill_s").append(running).append("_ms\": ").append(stats(prefill));
              json.append(", \"decode_s").append(running).append("_tokens_per_s\": ").append(stats(tokensPerSecond));
              if (longPrompt > 0 && running == activeCounts.get(0) && slots == slotCounts.get(0)) {
                json.append(longPrefill(decoder, longPrompt, reps));
              }
              memory.add(ProcessMemory.at("decoded_s" + running, plugin, weightPaths));
              // VmHWM only grows: each count's figure is the peak of everything up to its decode.
              json.append(", \"peak_rss_s").append(running).append("_bytes\": ").append(ProcessMemory.peakResidentBytes());
              if (running == activeCounts.get(0) && slots == slotCounts.get(0)) {
                json.append(", \"peak_rss_bytes\": ").append(ProcessMemory.peakResidentBytes());
              }
            }
          }
        }
      }
    }
    return weightBytes;
  }

  /**
   * The prompt length of the prefill and decode rows: {@code asked}, at most the longest prompt the decoder
   * takes, and short enough that {@code steps} decode steps after it stay inside the context.
   */
  static int promptLength(int asked, int maxPrompt, int context, int steps) {
    int t = Math.min(asked, Math.min(maxPrompt, context - steps));
    if (t < 1) {
      throw new IllegalArgumentException("a context of " + context + " positions leaves no room for a prompt before "
          + steps + " decode steps: ask for fewer steps");
    }
    return t;
  }

  /** The {@code prefill_long} fields: a {@code tokens}-long prompt into slot 0, a warm-up then {@code reps} timed. */
  private static String longPrefill(PackageSlotDecoder decoder, int tokens, int reps) {
    int[] prompt = new int[tokens];
    for (int i = 0; i < tokens; i++) {
      prompt[i] = i % decoder.vocabulary();
    }
    List<Double> ms = new ArrayList<>();
    try {
      for (int r = 0; r < reps + 1; r++) {
        long t0 = System.nanoTime();
        decoder.prefill(0, prompt);
        if (r > 0) {
          ms.add((System.nanoTime() - t0) / 1e6);
        }
      }
    } catch (InvalidArgumentException e) { // the package's prompt limit: said in the output, not a failure
      return ", \"prefill_long_tokens\": " + tokens + ", \"prefill_long_refused\": \""
          + e.getMessage().replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }
    return ", \"prefill_long_tokens\": " + tokens + ", \"prefill_long_ms\": " + stats(ms);
  }

  /**
   * Memory-maps the package's weights and uploads every tensor once to {@code device}; the caller owns the
   * buffers. What "load" times on both sides (JAX: safetensors load_file + device_put); compiling the
   * programs is not in it.
   */
  private static List<DeviceBuffer> uploadWeights(XlaClient client, ModelPackage pkg, Device device) {
    List<DeviceBuffer> out = new ArrayList<>();
    try (WeightFiles weights = pkg.openWeights()) {
      for (String name : weights.types().keySet()) {
        out.add(client.upload(weights.tensor(name), device));
      }
      return out;
    } catch (RuntimeException e) {
      out.forEach(DeviceBuffer::close);
      throw e;
    }
  }

  private static List<Path> weightFiles(ModelPackage pkg) {
    try (WeightFiles weights = pkg.openWeights()) {
      return weights.files();
    }
  }

  private static String stats(List<Double> xs) {
    List<Double> s = new ArrayList<>(xs);
    Collections.sort(s);
    return String.format(Locale.ROOT, "{\"min\": %.3f, \"median\": %.3f, \"max\": %.3f}", s.get(0), s.get(s.size() / 2),
        s.get(s.size() - 1));
  }
}
