package dev.xlaactors.bench;

import dev.xlaactors.examples.gpt.GptArtifacts;
import dev.xlaactors.examples.gpt.GptGeneration;
import dev.xlaactors.examples.gpt.GptModel;
import dev.xlaactors.examples.gpt.GptSampling;
import dev.xlaactors.examples.gpt.SamplingSettings;
import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.runtime.DeviceBuffer;
import dev.xlaactors.runtime.XlaClient;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Behaviors;

/**
 * Java's side of {@code bench/run.sh models} on the artifacts of {@code tools/jax_gpt.py} (the 124 M
 * GPT): time to load the weights (memory-map the safetensors file and upload every tensor), prefill of
 * 128 tokens, decode tokens/s at each exported batch size with the sampling callback (temperature 0.8,
 * top-k 40, as JAX's side) inside the decode program and the KV cache donated each step, each step a
 * supervised run (CallbackRuntime.startOnDevice, "sample" served by {@link GptSampling}), and the peak RSS
 * after batch 1 (load and serve one sequence) and at the end.
 * Prints one JSON line with the same keys as {@code tools/jax_gpt.py bench}.
 *
 * <p>Usage: {@code ModelsBench <artifacts dir> [reps] [steps]}.
 */
public final class ModelsBench {
  private ModelsBench() {}

  public static void main(String[] args) throws Exception {
    GptArtifacts artifacts = GptArtifacts.open(Path.of(args[0]));
    int reps = args.length > 1 ? Integer.parseInt(args[1]) : 5;
    int steps = args.length > 2 ? Integer.parseInt(args[2]) : 32;
    StringBuilder json = new StringBuilder("{");
    ActorSystem<Void> system = ActorSystem.create(Behaviors.empty(), "models-bench");
    try (XlaClient client = XlaClient.create();
        CallbackRuntime runtime = CallbackRuntime.create(system, client)) {
      List<Double> loads = new ArrayList<>();
      for (int r = 0; r < reps; r++) {
        long t0 = System.nanoTime();
        Map<String, DeviceBuffer> w = GptModel.uploadWeights(client, artifacts, client.devices().get(0));
        loads.add((System.nanoTime() - t0) / 1e6);
        w.values().forEach(DeviceBuffer::close);
        System.gc(); // the JDK unmaps a closed file's mappings when their buffers are collected
      }
      json.append("\"load_ms\": ").append(stats(loads));
      int t = artifacts.prefillLength();
      // One copy of the weights serves every batch size (as a server would): loading them again per batch
      // size would map the file a second time while the first mapping waits for the GC to unmap it.
      Map<String, DeviceBuffer> weights = GptModel.uploadWeights(client, artifacts, client.devices().get(0));
      for (int batch : artifacts.batches()) {
        try (GptModel model = GptModel.load(client, artifacts, batch, weights);
            GptSampling sampling = GptSampling.register(runtime, model, system)) {
          int[][] prompts = new int[batch][t];
          for (int[] row : prompts) {
            for (int i = 0; i < t; i++) {
              row[i] = i % artifacts.vocab();
            }
          }
          SamplingSettings settings = new SamplingSettings(0.8, 40, 1.0, Set.of(), 1);
          List<Double> prefill = new ArrayList<>();
          List<Double> tokensPerSecond = new ArrayList<>();
          for (int r = 0; r < reps + 1; r++) { // the first repetition warms up
            long t0 = System.nanoTime();
            model.prefill(prompts).cache().close();
            double prefillMs = (System.nanoTime() - t0) / 1e6;
            try (GptGeneration g = model.start(prompts, settings, steps + 1, sampling)) {
              g.next(); // sampled from the prefill's logits
              long t1 = System.nanoTime();
              for (int s = 0; s < steps; s++) {
                if (g.next() == null) {
                  throw new IllegalStateException("generation stopped after " + s + " steps");
                }
              }
              double seconds = (System.nanoTime() - t1) / 1e9;
              if (r > 0) {
                prefill.add(prefillMs);
                tokensPerSecond.add(batch * steps / seconds);
              }
            }
          }
          json.append(", \"prefill_b").append(batch).append("_ms\": ").append(stats(prefill));
          json.append(", \"decode_b").append(batch).append("_tokens_per_s\": ").append(stats(tokensPerSecond));
        }
        if (batch == 1) { // RSS of loading the model and serving batch 1 (batch 8 adds its 600 MB KV cache)
          json.append(", \"peak_rss_bytes\": ").append(peakRssBytes());
        }
      }
      weights.values().forEach(DeviceBuffer::close);
    }
    system.terminate();
    system.getWhenTerminated().toCompletableFuture().get(10, TimeUnit.SECONDS);
    json.append(", \"peak_rss_all_bytes\": ").append(peakRssBytes());
    json.append(", \"weights_bytes\": ").append(artifacts.weightBytes()).append("}");
    System.out.println(json);
  }

  private static String stats(List<Double> xs) {
    List<Double> s = new ArrayList<>(xs);
    Collections.sort(s);
    return String.format(Locale.ROOT, "{\"min\": %.3f, \"median\": %.3f, \"max\": %.3f}", s.get(0), s.get(s.size() / 2),
        s.get(s.size() - 1));
  }

  /** VmHWM of /proc/self/status: the process's peak resident set. */
  private static long peakRssBytes() throws Exception {
    for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
      if (line.startsWith("VmHWM:")) {
        return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
      }
    }
    return -1;
  }
}
