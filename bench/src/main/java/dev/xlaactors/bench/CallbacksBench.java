package dev.xlaactors.bench;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.xlaactors.actors.CallbackOptions;
import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostCall;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.HostFunction;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.RunContext;
import dev.xlaactors.runtime.RuntimeSettings;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.Model;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ForkJoinPool;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Behaviors;

/**
 * The Java half of {@code bench/run.sh callbacks}: the cost of a host callback served by xla-actors
 * ({@link CallbackRuntime}, default settings) with f32[8] in and out, per call inside a program that makes
 * {@value #K} calls in sequence and for a program that makes one; callbacks per second with 1 and 8
 * concurrent runs; a 16 MiB in / 16 MiB out callback against a plain 16 MiB memcpy; and (a bonus row) the
 * {@value #K}-call program with its callback registered inline ({@link CallbackRuntime#registerInline}).
 * Prints {@code BENCH}
 * lines (see {@link LatencyProbe.Result#toBenchLine()}; throughput rows carry {@code cbps=}) and {@code
 * INFO} lines. The JAX half, bench/jax_callbacks.py, measures the same programs under the same names.
 *
 * <p>With the argument {@code profile} ({@code bench/run.sh callbacks-profile}) it instead splits the
 * per-callback time of the {@value #K}-call program into its parts: the native bridge alone (the call
 * answered on the XLA thread), the cost of handing the call to other threads, and the full actors path
 * under several dispatcher settings, each in a fresh actor system. It prints {@code PROFILE} lines.
 */
public final class CallbacksBench {
  /** Callbacks per run in the sequential-calls program: amortises the per-run cost to 1/K. */
  static final int K = 100;
  /** Callbacks per run in the 16 MiB program (each moves 32 MiB, so few suffice). */
  static final int BIG_K = 8;
  static final int BIG_ELEMENTS = 4 << 20; // f32[4194304] = 16 MiB
  static final long BIG_BYTES = 4L * BIG_ELEMENTS;

  private static final TensorType F32_8 = TensorType.of(DType.F32, 8);
  private static final TensorType F32_BIG = TensorType.of(DType.F32, BIG_ELEMENTS);

  private static final LatencyProbe.Budget LOOP = new LatencyProbe.Budget(30, 5_000, 5.0);
  private static final LatencyProbe.Budget SINGLE = new LatencyProbe.Budget(2_000, 20_000, 4.0);
  private static final LatencyProbe.Budget BIG = new LatencyProbe.Budget(2, 60, 8.0);
  private static final LatencyProbe.Budget MEMCPY = new LatencyProbe.Budget(20, 500, 2.0);
  private static final LatencyProbe.Budget PROFILE = new LatencyProbe.Budget(20, 3_000, 3.0);
  private static final double THROUGHPUT_WARMUP_SECONDS = 1.0;
  /**
   * How long the f32[8] programs run before anything is timed (BENCH_WARMUP_SECONDS, default 15): the JIT
   * compiles the call path for about 10 s, during which a call costs 2 to 4 times its steady-state time
   * on 2 cores, and the JAX side warms up as long.
   */
  static final double WARMUP_SECONDS = Double.parseDouble(
      Objects.requireNonNullElse(System.getenv("BENCH_WARMUP_SECONDS"), "15"));
  private static final double THROUGHPUT_SECONDS = 3.0;

  /** Run ids of the profile's runs outside CallbackRuntime; far from the runtime's own. */
  private static final AtomicLong RAW_RUN_IDS = new AtomicLong(1L << 40);

  private CallbacksBench() {}

  /** The host callback custom call, as the actors module's programs write it. */
  static String callbackCall(String result, String callback, String operand, String type) {
    return callbackCall(result, callback, operand, type, false);
  }

  /**
   * The host callback custom call; {@code inPlace}: its output written over its operand's buffer, as
   * {@code GraphBuilder.hostCallInPlace} writes it.
   */
  static String callbackCall(String result, String callback, String operand, String type, boolean inPlace) {
    String aliases = inPlace
        ? ", output_operand_aliases = [#stablehlo.output_operand_alias<output_tuple_indices = [], operand_index = 0, operand_tuple_indices = []>]"
        : "";
    return "%s = stablehlo.custom_call @xla_actors.host_callback(%s) {api_version = 4 : i32, backend_config = {callback = \"%s\"}, has_side_effect = true%s} : (%s) -> %s"
        .formatted(result, operand, callback, aliases, type, type);
  }

  /**
   * {@code main(x) -> x'} calling {@code callback} {@code k} times in sequence, each call on the previous
   * result: the while loop {@code jax.lax.fori_loop(0, k, lambda i, c: pure_callback(f, spec, c), x)}
   * lowers to, so both sides run the same program shape.
   */
  static String loopProgram(String callback, String type, int k) {
    return loopProgram(callback, type, k, false);
  }

  /** {@link #loopProgram(String, String, int)}, its calls in place when {@code inPlace}. */
  static String loopProgram(String callback, String type, int k, boolean inPlace) {
    return """
        func.func @main(%x: TYPE) -> TYPE {
          %c0 = stablehlo.constant dense<0> : tensor<i32>
          %r:2 = stablehlo.while(%i = %c0, %v = %x) : tensor<i32>, TYPE
          cond {
            %k = stablehlo.constant dense<K> : tensor<i32>
            %p = stablehlo.compare LT, %i, %k, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
            stablehlo.return %p : tensor<i1>
          } do {
            CALL
            %one = stablehlo.constant dense<1> : tensor<i32>
            %n = stablehlo.add %i, %one : tensor<i32>
            stablehlo.return %n, %y : tensor<i32>, TYPE
          }
          return %r#1 : TYPE
        }
        """
        .replace("CALL", callbackCall("%y", callback, "%v", "TYPE", inPlace))
        .replace("TYPE", type)
        .replace("K", Integer.toString(k));
  }

  /** {@code main(x) -> f(x)}: one callback per run. */
  static String singleProgram(String callback, String type) {
    return """
        func.func @main(%x: TYPE) -> TYPE {
          CALL
          return %y : TYPE
        }
        """
        .replace("CALL", callbackCall("%y", callback, "%x", "TYPE"))
        .replace("TYPE", type);
  }

  /** The programs of both modes, compiled once per client. */
  private record Programs(Model loop, Model single, Model big, Model bigBorrowed,
      Model bigInPlace, Model bigBorrowedInPlace, Model loopInline) {
    static Programs compile(XlaClient client) {
      String bigType = "tensor<" + BIG_ELEMENTS + "xf32>";
      return new Programs(
          Model.compile(client, loopProgram("echo8", "tensor<8xf32>", K)),
          Model.compile(client, singleProgram("echo8", "tensor<8xf32>")),
          Model.compile(client, loopProgram("echo16m", bigType, BIG_K)),
          Model.compile(client, loopProgram("echo16mborrowed", bigType, BIG_K)),
          Model.compile(client, loopProgram("echo16m", bigType, BIG_K, true)),
          Model.compile(client, loopProgram("echo16mborrowed", bigType, BIG_K, true)),
          Model.compile(client, loopProgram("echo8inline", "tensor<8xf32>", K)));
    }
  }

  /** The benchmark's callbacks: return their input (legal: inputs are immutable copies owned by Java). */
  private static class Echo implements HostFunction {
    final AtomicLong calls = new AtomicLong();

    @Override
    public List<HostTensor> apply(List<HostTensor> inputs, Object staticArgument) {
      calls.incrementAndGet();
      return inputs;
    }
  }

  /**
   * The 16 MiB echo, which closes its inputs once their call is answered, so their pooled memory serves
   * the next call's inputs (see HostMemoryPool). A function cannot close what it returns (the call copies
   * its outputs after it returns), so each call closes the inputs of the call before, which its program
   * made and had answered first: the program makes its calls one after another.
   */
  private static final class ClosingEcho extends Echo {
    private final AtomicReference<List<HostTensor>> previous = new AtomicReference<>(List.of());

    @Override
    public List<HostTensor> apply(List<HostTensor> inputs, Object staticArgument) {
      previous.getAndSet(inputs).forEach(HostTensor::close);
      return super.apply(inputs, staticArgument);
    }

    /** Closes the last call's inputs (once its run has ended). */
    void closeLast() {
      previous.getAndSet(List.of()).forEach(HostTensor::close);
    }
  }

  public static void main(String[] args) throws Exception {
    boolean profile = args.length > 0 && args[0].equals("profile");
    RuntimeSettings settings = RuntimeSettings.load();
    try (XlaClient client = XlaClient.create(settings)) {
      Programs programs = Programs.compile(client);
      System.out.printf(
          Locale.ROOT,
          "INFO side=java platform=%s devices=%d client_asynchronous=%s jvm=%s available_processors=%d k=%d big_k=%d%n",
          client.platformName(),
          client.devices().size(),
          settings.clientAsynchronous(),
          System.getProperty("java.vm.version"),
          Runtime.getRuntime().availableProcessors(),
          K,
          BIG_K);
      if (profile) {
        profile(client, programs);
      } else {
        benchmark(client, programs);
      }
    }
  }

  // ---------------------------------------------------------------------------------------------
  // bench/run.sh callbacks

  private static void benchmark(XlaClient client, Programs programs) throws Exception {
    Bench bench = Bench.start(client, ConfigFactory.load());
    try {
      HostTensor small = HostTensor.ofFloats(new float[] {1, 2, 3, 4, 5, 6, 7, 8});
      float[] bigValues = new float[BIG_ELEMENTS];
      for (int i = 0; i < bigValues.length; i++) {
        bigValues[i] = i;
      }
      HostTensor big = HostTensor.ofFloats(bigValues);
      // A benchmark of a wrong answer is worthless: check once before timing that every call happened
      // and the values came through.
      bench.check(programs.loop(), small, K);
      bench.check(programs.single(), small, 1);
      bench.check(programs.big(), big, BIG_K);
      bench.check(programs.bigBorrowed(), big, BIG_K);
      bench.check(programs.bigInPlace(), big, BIG_K);
      bench.bigEcho().closeLast();
      bench.check(programs.bigBorrowedInPlace(), big, BIG_K);
      bench.check(programs.loopInline(), small, K);

      CallbackRuntime callbacks = bench.callbacks();
      List<Argument> smallIn = Argument.of(List.of(small));
      List<Argument> bigIn = Argument.of(List.of(big));
      long warmupEnd = System.nanoTime() + (long) (WARMUP_SECONDS * 1e9);
      while (System.nanoTime() < warmupEnd) {
        callbacks.run(programs.loop(), smallIn);
        callbacks.run(programs.single(), smallIn);
        callbacks.run(programs.loopInline(), smallIn);
      }
      System.out.printf(Locale.ROOT, "INFO side=java warmup_seconds=%.0f%n", WARMUP_SECONDS);
      print(
          LatencyProbe.measure("loop_f32x8", 0, LOOP, () -> callbacks.run(programs.loop(), smallIn))
              .perStep(K));
      print(LatencyProbe.measure("single_f32x8", 0, SINGLE, () -> callbacks.run(programs.single(), smallIn)));
      for (int threads : new int[] {1, 8}) {
        double perSecond = throughput(threads, () -> callbacks.run(programs.loop(), smallIn)) * K;
        System.out.printf(Locale.ROOT, "BENCH side=java name=throughput_%d cbps=%.1f threads=%d%n", threads, perSecond, threads);
      }
      // Each call copies 16 MiB out of XLA into Java and 16 MiB back: 2 copies per callback.
      // The run's output is a download too: closed, as a caller done with it would.
      print(
          LatencyProbe.measure(
                  "callback_16MiB", BIG_BYTES, 2, BIG,
                  () -> callbacks.run(programs.big(), bigIn).forEach(HostTensor::close))
              .perStep(BIG_K));
      bench.bigEcho().closeLast();
      // The same with the callback registered with borrowed inputs: it gets XLA's buffer, and its answer
      // (that buffer) is copied straight into XLA's result buffer: 1 copy per callback.
      print(
          LatencyProbe.measure(
                  "callback_16MiB_borrowed", BIG_BYTES, 2, BIG,
                  () -> callbacks.run(programs.bigBorrowed(), bigIn).forEach(HostTensor::close))
              .perStep(BIG_K));
      // In place (the program's output_operand_aliases, GraphBuilder.hostCallInPlace): each call's output
      // is written over its input, in the loop's own buffer, so XLA no longer copies the result into the
      // loop's carried value (16 MiB per call). Copied inputs: the call still copies 16 MiB in and 16 MiB
      // out. Borrowed inputs: the answer is the input buffer itself, already where the output goes, so
      // no byte moves.
      print(
          LatencyProbe.measure(
                  "callback_16MiB_in_place", BIG_BYTES, 2, BIG,
                  () -> callbacks.run(programs.bigInPlace(), bigIn).forEach(HostTensor::close))
              .perStep(BIG_K));
      bench.bigEcho().closeLast();
      print(
          LatencyProbe.measure(
                  "callback_16MiB_borrowed_in_place", BIG_BYTES, 2, BIG,
                  () -> callbacks.run(programs.bigBorrowedInPlace(), bigIn).forEach(HostTensor::close))
              .perStep(BIG_K));
      ByteBuffer source = ByteBuffer.allocateDirect((int) BIG_BYTES);
      source.asFloatBuffer().put(bigValues);
      ByteBuffer target = ByteBuffer.allocateDirect((int) BIG_BYTES);
      print(LatencyProbe.measure("memcpy_16MiB", BIG_BYTES, 1, MEMCPY, () -> target.clear().put(source.duplicate())));
      if (!source.equals(target.clear())) {
        throw new IllegalStateException("memcpy check failed");
      }
      // Bonus: the K-call program with its callback run inline on XLA's thread (registerInline).
      print(
          LatencyProbe.measure("loop_f32x8_inline", 0, LOOP, () -> callbacks.run(programs.loopInline(), smallIn))
              .perStep(K));
    } finally {
      bench.close();
    }
  }

  /**
   * Operations per second of {@code threads} threads each repeating {@code operation} as fast as it
   * completes, after a warm-up; counts only operations that completed inside the timed window's start
   * and the last thread's end.
   */
  static double throughput(int threads, LatencyProbe.Operation operation) throws Exception {
    long[] completed = new long[threads];
    Throwable[] failures = new Throwable[threads];
    long warmupEnd = System.nanoTime() + (long) (THROUGHPUT_WARMUP_SECONDS * 1e9);
    long end = warmupEnd + (long) (THROUGHPUT_SECONDS * 1e9);
    List<Thread> workers = new ArrayList<>();
    for (int t = 0; t < threads; t++) {
      int index = t;
      Thread worker =
          new Thread(
              () -> {
                try {
                  while (System.nanoTime() < warmupEnd) {
                    operation.runOnce();
                  }
                  long n = 0;
                  while (System.nanoTime() < end) {
                    operation.runOnce();
                    n++;
                  }
                  completed[index] = n;
                } catch (Throwable e) {
                  failures[index] = e;
                }
              },
              "bench-throughput-" + t);
      workers.add(worker);
    }
    workers.forEach(Thread::start);
    // Measured from the start of the window to the last operation's end: an operation started just before
    // the end counts, and so does the time it took.
    for (Thread worker : workers) {
      worker.join();
    }
    long finished = System.nanoTime();
    for (Throwable failure : failures) {
      if (failure != null) {
        throw new IllegalStateException("throughput run failed", failure);
      }
    }
    long total = Arrays.stream(completed).sum();
    return total / ((finished - warmupEnd) / 1e9);
  }

  /** An actor system with a CallbackRuntime that serves the benchmark's callbacks. */
  private record Bench(
      ActorSystem<Void> system, CallbackRuntime callbacks, Echo echo, ClosingEcho bigEcho, Echo borrowedEcho, Echo inlineEcho) {
    static Bench start(XlaClient client, Config config) {
      ActorSystem<Void> system = ActorSystem.create(Behaviors.empty(), "bench", config);
      CallbackRuntime callbacks = CallbackRuntime.create(system, client);
      Echo echo = new Echo();
      ClosingEcho bigEcho = new ClosingEcho();
      Echo borrowedEcho = new Echo();
      Echo inlineEcho = new Echo();
      callbacks.register("echo8", List.of(F32_8), null, echo).toCompletableFuture().join();
      callbacks.register("echo16m", List.of(F32_BIG), null, bigEcho).toCompletableFuture().join();
      callbacks.register(new HostCallback("echo16mborrowed", List.of(F32_BIG), null, borrowedEcho),
          CallbackOptions.DEFAULT.withBorrowedInputs()).toCompletableFuture().join();
      callbacks.registerInline(new HostCallback("echo8inline", List.of(F32_8), null, inlineEcho))
          .toCompletableFuture().join();
      return new Bench(system, callbacks, echo, bigEcho, borrowedEcho, inlineEcho);
    }

    void check(Model program, HostTensor input, int expectedCalls) {
      long before = totalCalls();
      List<HostTensor> out = callbacks.run(program, Argument.of(List.of(input)));
      long calls = totalCalls() - before;
      requireSame(input, out, calls, expectedCalls);
    }

    private long totalCalls() {
      return echo.calls.get() + bigEcho.calls.get() + borrowedEcho.calls.get() + inlineEcho.calls.get();
    }

    void close() throws Exception {
      callbacks.close();
      system.terminate();
      system.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS);
    }
  }

  private static void requireSame(HostTensor input, List<HostTensor> out, long calls, int expectedCalls) {
    if (calls != expectedCalls || out.size() != 1 || !out.get(0).data().equals(input.data())) {
      throw new IllegalStateException(
          "wrong result: " + calls + " callback calls (expected " + expectedCalls + "), output " + out);
    }
  }

  private static void print(LatencyProbe.Result result) {
    System.out.println(result.toBenchLine());
  }

  // ---------------------------------------------------------------------------------------------
  // bench/run.sh callbacks-profile

  /** A way of answering host calls outside the actors: the parts of the actors path, one at a time. */
  private interface RawSink {
    void accept(HostCall call);
  }

  private static void profile(XlaClient client, Programs programs) throws Exception {
    HostTensor small = HostTensor.ofFloats(new float[] {1, 2, 3, 4, 5, 6, 7, 8});
    Duration backstop = Duration.ofSeconds(30);

    // 1. The native bridge alone: the JNI upcall (direct ByteBuffer per input, HostTensors, HostCall)
    //    answered on the XLA thread itself, then HostCall.complete (JNI, memcpy, notify of nobody).
    profileLine("raw", "inline on the XLA thread (JNI + complete, no thread switch)",
        rawLoop(client, programs.loop(), small, backstop, call -> call.complete(call.inputs())));

    // 2. One thread switch: the XLA thread parks until another thread answers, as with any dispatcher.
    ExecutorService single = Executors.newSingleThreadExecutor();
    profileLine("raw", "1 hop: XLA thread -> 1 pooled thread (ThreadPoolExecutor) -> complete",
        rawLoop(client, programs.loop(), small, backstop, call -> single.execute(() -> call.complete(call.inputs()))));
    ForkJoinPool forkJoin = new ForkJoinPool(2);
    profileLine("raw", "1 hop: XLA thread -> ForkJoinPool(2) -> complete",
        rawLoop(client, programs.loop(), small, backstop, call -> forkJoin.execute(() -> call.complete(call.inputs()))));

    // 3. Three thread switches, the number on the actors' critical path (supervisor, dispatcher actor,
    //    callback pool), with plain executors: what the hops cost without the actors' own work.
    ExecutorService second = Executors.newSingleThreadExecutor();
    ExecutorService third = Executors.newSingleThreadExecutor();
    profileLine("raw", "3 hops: XLA -> pool A -> pool B -> pool C -> complete",
        rawLoop(client, programs.loop(), small, backstop,
            call -> single.execute(() -> second.execute(() -> third.execute(() -> call.complete(call.inputs()))))));
    single.shutdown();
    second.shutdown();
    third.shutdown();
    forkJoin.shutdown();

    // 4. The actors path, default settings and variants; each a fresh actor system.
    String[][] variants = {
      {"defaults", ""},
      {"callbacks.threads = 2", "xla-actors.actors.callbacks.threads = 2"},
      {"default-dispatcher throughput=1", "pekko.actor.default-dispatcher.throughput = 1"},
      {"default-dispatcher throughput=100", "pekko.actor.default-dispatcher.throughput = 100"},
      {"default-dispatcher fork-join parallelism 2",
        "pekko.actor.default-dispatcher.fork-join-executor { parallelism-min = 2, parallelism-max = 2 }"},
      {"default-dispatcher thread-pool-executor fixed 4",
        "pekko.actor.default-dispatcher { executor = thread-pool-executor\n thread-pool-executor.fixed-pool-size = 4 }"},
      {"default-dispatcher affinity-pool(2) idle-cpu-level=10 (spins)",
        "pekko.actor.default-dispatcher { executor = affinity-pool-executor\n"
            + " affinity-pool-executor { parallelism-min = 2, parallelism-max = 2, idle-cpu-level = 10 } }"},
    };
    List<Argument> smallIn = Argument.of(List.of(small));
    for (String[] variant : variants) {
      Config config = ConfigFactory.parseString(variant[1]).withFallback(ConfigFactory.load()).resolve();
      Bench bench = Bench.start(client, config);
      try {
        bench.check(programs.loop(), small, K);
        profileLine("actors", variant[0],
            LatencyProbe.measure("p", 0, PROFILE, () -> bench.callbacks().run(programs.loop(), smallIn)).perStep(K));
      } finally {
        bench.close();
      }
    }

    // 5. The 16 MiB callback: its floor (inline: a pooled input, two memcpys) and the pieces.
    float[] bigValues = new float[BIG_ELEMENTS];
    HostTensor big = HostTensor.ofFloats(bigValues);
    LatencyProbe.Budget bigBudget = new LatencyProbe.Budget(2, 40, 5.0);
    // complete() has copied the outputs into XLA's buffer when it returns, so the input can be closed then
    // and its pooled memory serves the next call's input.
    profileLine("raw16m", "16 MiB callback inline on the XLA thread, inputs closed (per call, K=" + BIG_K + ")",
        rawRun(client, programs.big(), big, backstop, call -> {
          call.complete(call.inputs());
          call.inputs().forEach(HostTensor::close);
        }, bigBudget).perStep(BIG_K));
    profileLine("raw16m", "16 MiB callback inline on the XLA thread, inputs left to the GC (per call, K=" + BIG_K + ")",
        rawRun(client, programs.big(), big, backstop, call -> call.complete(call.inputs()), bigBudget).perStep(BIG_K));
    // What the JNI upcall did per input before the pool: ByteBuffer.allocateDirect, which zeroes the memory
    // and leaves freeing it to the GC (Bits.reserveMemory calls System.gc() and waits once
    // MaxDirectMemorySize is reached) ...
    profileLine("raw16m", "ByteBuffer.allocateDirect(16 MiB), freed by the GC (what the upcall did before the pool)",
        LatencyProbe.measure("p", 0, new LatencyProbe.Budget(5, 200, 2.0), () -> ByteBuffer.allocateDirect((int) BIG_BYTES)));
    // ... against the same allocation freed at once (Unsafe.invokeCleaner), as a native-owned buffer
    // released after the call would be.
    sun.misc.Unsafe unsafe = unsafe();
    profileLine("raw16m", "ByteBuffer.allocateDirect(16 MiB), freed at once (invokeCleaner)",
        LatencyProbe.measure("p", 0, new LatencyProbe.Budget(5, 200, 2.0), () -> unsafe.invokeCleaner(ByteBuffer.allocateDirect((int) BIG_BYTES))));
    ByteBuffer source = ByteBuffer.allocateDirect((int) BIG_BYTES);
    ByteBuffer target = ByteBuffer.allocateDirect((int) BIG_BYTES);
    profileLine("raw16m", "memcpy 16 MiB direct -> direct",
        LatencyProbe.measure("p", 0, MEMCPY, () -> target.clear().put(source.duplicate())));
    Executable plain = client.compile(
        "func.func @main(%x: tensor<" + BIG_ELEMENTS + "xf32>) -> tensor<" + BIG_ELEMENTS + "xf32> {\n"
            + "  %y = stablehlo.add %x, %x : tensor<" + BIG_ELEMENTS + "xf32>\n  return %y : tensor<" + BIG_ELEMENTS + "xf32>\n}\n");
    profileLine("raw16m", "plain run of a 16 MiB add, no callback (upload+add+download; 1/" + BIG_K + " of it is in each call above)",
        LatencyProbe.measure("p", 0, bigBudget, () -> plain.run(big).forEach(HostTensor::close)));
  }

  private static sun.misc.Unsafe unsafe() throws ReflectiveOperationException {
    java.lang.reflect.Field f = sun.misc.Unsafe.class.getDeclaredField("theUnsafe");
    f.setAccessible(true);
    return (sun.misc.Unsafe) f.get(null);
  }

  private static LatencyProbe.Result rawLoop(
      XlaClient client, Model program, HostTensor input, Duration backstop, RawSink sink) throws Exception {
    return rawRun(client, program, input, backstop, sink, PROFILE).perStep(K);
  }

  /** Runs {@code program} with a RunContext whose host calls go straight to {@code sink}: no actors. */
  private static LatencyProbe.Result rawRun(
      XlaClient client, Model program, HostTensor input, Duration backstop, RawSink sink, LatencyProbe.Budget budget)
      throws Exception {
    List<Argument> inputs = Argument.of(List.of(input));
    return LatencyProbe.measure(
        "p",
        0,
        budget,
        () -> {
          try (RunContext context =
              RunContext.withHostCalls(client.plugin(), RAW_RUN_IDS.incrementAndGet(), sink::accept, backstop)) {
            program.run(inputs, context).forEach(HostTensor::close); // Executable.run's path
          }
        });
  }

  private static void profileLine(String group, String label, LatencyProbe.Result r) {
    System.out.printf(
        Locale.ROOT,
        "PROFILE group=%s median_us=%.2f p99_us=%.2f samples=%d label=%s%n",
        group,
        r.medianMicros(),
        r.p99Micros(),
        r.samples(),
        label);
  }
}
