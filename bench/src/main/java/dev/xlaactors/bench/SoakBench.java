package dev.xlaactors.bench;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.xlaactors.actors.CallbackRuntime;
import dev.xlaactors.actors.RunHandle;
import dev.xlaactors.actors.jobs.Program;
import dev.xlaactors.actors.jobs.ResultJournal;
import dev.xlaactors.cluster.JobJournalSettings;
import dev.xlaactors.cluster.ShardedBatchJobs;
import dev.xlaactors.cluster.XlaCluster;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import dev.xlaactors.graph.GraphBuilder;
import dev.xlaactors.graph.Value;
import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.Executable;
import dev.xlaactors.runtime.HostCallback;
import dev.xlaactors.runtime.HostTensor;
import dev.xlaactors.runtime.TensorType;
import dev.xlaactors.runtime.XlaClient;
import dev.xlaactors.runtime.model.Argument;
import dev.xlaactors.runtime.model.Model;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintWriter;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.SplittableRandom;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.cluster.sharding.typed.ShardingEnvelope;

/**
 * The soak of issue 24: many mixed runs with injected faults, in a cluster node that is killed (SIGKILL)
 * once per 10,000 runs, and a count of what went wrong.
 *
 * <p>A worker JVM (a one-node cluster that serves the H2 job journal itself, so a kill takes the
 * database's server down too) runs {@value #JOBS} sharded batch jobs at once; every item of a job is one
 * run: a {@link CallbackRuntime} run of a program whose host callback answers (85%), throws (5%), sleeps
 * past the callback timeout (5%), or is cancelled while it waits (5%). The item's outcome (succeeded,
 * failed, timed out, cancelled, anything else, or no outcome within the timeout plus a margin: hung) is
 * what the job records in its journal; the job's sink prints {@code ACK} for each recorded item. This
 * (driver) JVM kills the worker at random points, restarts it (the jobs resume from the journal), and at
 * the end reads the jobs' output files (once a job ended, its journal keeps only its end: the items'
 * events are deleted) and counts what is left in the journal:
 *
 * <ul>
 *   <li>lost: a run with no outcome in its job's output (an acknowledged item missing from it among them);
 *   <li>duplicated: an item twice in an output file, or acknowledged twice (computed again after a
 *       restart that did not find it in the journal);
 *   <li>hung: a run with no outcome within its timeout plus {@value #HUNG_MARGIN_MS} ms (and every run left
 *       when the worker made no progress for {@value #STALL_SECONDS} s);
 *   <li>crashed: a worker JVM that ended other than by this JVM's kill or stop;
 *   <li>wrong: an outcome that is not the one its fault calls for (an answer with wrong values included);
 *   <li>rss_growth_mb: the worker's resident memory at the last run minus at 90% of the runs (the kills
 *       all fall before 80%, so one warm JVM runs the last 20%).
 * </ul>
 *
 * <p>Ends with {@code RESULT soak runs=<n> lost=<n> duplicated=<n> hung=<n> crashed=<n> rss_growth_mb=<x>
 * wrong=<n>}. Arguments: the number of runs (default 100000). With {@code worker ...} it is the worker.
 */
public final class SoakBench {
  private SoakBench() {}

  static final int JOBS = 8;
  static final int RUNS_PER_KILL = 10_000;
  static final long CALLBACK_TIMEOUT_MS = 200;
  static final long CALLBACK_DEFAULT_TIMEOUT_MS = 30_000;
  static final long HUNG_MARGIN_MS = 10_000;
  static final int STALL_SECONDS = 120;
  private static final TensorType ITEM = TensorType.of(DType.F32, 4);
  /** The callback of every run but the TIMEOUT ones: a generous timeout, so a busy machine never trips it. */
  private static final String CALLBACK = "soak-callback";
  /** The callback of TIMEOUT runs: its timeout is {@link #CALLBACK_TIMEOUT_MS}. */
  private static final String SLOW_CALLBACK = "soak-slow-callback";

  /** The fault a run gets, and the outcome it must end with. */
  enum Kind {
    OK, FAIL, TIMEOUT, CANCEL;

    /** Run {@code item} of job {@code job}'s fault: fixed by the seed, so a restart gives the same. */
    static Kind of(long seed, int job, long item) {
      int r = new SplittableRandom(seed * 1_000_003L + job * 1_000_000_007L + item).nextInt(100);
      return r < 85 ? OK : r < 90 ? FAIL : r < 95 ? TIMEOUT : CANCEL;
    }
  }

  /** The outcomes an item records (its code is the first value of its line). */
  enum Outcome { SUCCEEDED, FAILED, TIMED_OUT, CANCELLED, OTHER, HUNG }

  static Outcome expected(Kind kind) {
    return switch (kind) {
      case OK -> Outcome.SUCCEEDED;
      case FAIL -> Outcome.FAILED;
      case TIMEOUT -> Outcome.TIMED_OUT;
      case CANCEL -> Outcome.CANCELLED;
    };
  }

  public static void main(String[] args) throws Exception {
    if (args.length == 6 && args[0].equals("worker")) {
      worker(Integer.parseInt(args[1]), args[2], Long.parseLong(args[3]), Long.parseLong(args[4]), Path.of(args[5]));
      return;
    }
    long runs = args.length > 0 ? Long.parseLong(args[0]) : 100_000;
    if (args.length > 1 || runs < JOBS * 10L) {
      System.err.println("usage: SoakBench [runs], runs >= " + JOBS * 10);
      System.exit(2);
    }
    System.exit(drive(runs));
  }

  // ---------------------------------------------------------------------------------------------
  // The driver

  private static int drive(long requested) throws Exception {
    long perJob = (requested + JOBS - 1) / JOBS;
    long runs = perJob * JOBS;
    long seed = Long.getLong("soak.seed", System.nanoTime());
    Random random = new Random(seed);
    int kills = (int) Math.max(1, runs / RUNS_PER_KILL);
    long[] killAt = new long[kills];
    for (int k = 0; k < kills; k++) {
      double span = 0.75 * runs / kills;
      killAt[k] = (long) (0.05 * runs + k * span + random.nextDouble() * span);
    }
    // The journal this JVM reads at the end listens on loopback only, like the worker's.
    System.setProperty("h2.bindAddress", "127.0.0.1");
    Path dir = Files.createTempDirectory("xla-soak");
    String url = JobJournalSettings.h2File(dir.resolve("journal"));
    System.err.printf(Locale.ROOT, "soak: %d runs in %d jobs, %d kills, seed %d, in %s%n", runs, JOBS, kills, seed, dir);

    Map<String, Integer> acks = new ConcurrentHashMap<>();
    int killed = 0;
    int crashed = 0;
    int generation = 0;
    long rssAt90 = -1;
    long rssAtEnd = -1;
    long fileAt90 = -1; // the journal file while the worker has it open (it shrinks when the last JVM closes it)
    long fileAtEnd = -1;
    int rssGeneration = -1;
    long stalledRuns = 0;
    long t0 = System.nanoTime();
    Worker worker = null;
    try {
      while (true) {
        if (worker == null) {
          generation++;
          worker = Worker.start(generation, url, seed, perJob, dir, acks);
        }
        long done = acks.size();
        if (killed < kills && done >= killAt[killed] && worker.process.isAlive()) {
          worker.process.destroyForcibly();
          worker.process.waitFor(30, TimeUnit.SECONDS);
          worker.join();
          killed++;
          System.err.printf(Locale.ROOT, "soak: kill %d of %d after %d runs (%.0f s)%n", killed, kills, done, seconds(t0));
          worker = null;
          continue;
        }
        if (!worker.process.isAlive()) {
          worker.join();
          crashed++;
          System.err.printf(Locale.ROOT, "soak: worker %d ended by itself (exit %d) after %d runs; its output: %s%n",
              generation, worker.process.exitValue(), done, worker.log);
          worker = null;
          continue;
        }
        if (rssAt90 < 0 && done >= runs * 9 / 10) {
          rssAt90 = rssKb(worker.process.pid());
          rssGeneration = generation;
          fileAt90 = sizeOrMinusOne(dir.resolve("journal.mv.db"));
        }
        if (allOutputs(dir)) {
          rssAtEnd = rssKb(worker.process.pid());
          fileAtEnd = sizeOrMinusOne(dir.resolve("journal.mv.db"));
          if (rssGeneration != generation) {
            rssAtEnd = -1; // the JVM measured at 90% is gone: no growth to tell
          }
          break;
        }
        if (System.nanoTime() - worker.lastProgress.get() > TimeUnit.SECONDS.toNanos(STALL_SECONDS)) {
          stalledRuns = runs - done;
          System.err.printf(Locale.ROOT, "soak: no run finished for %d s; %d runs left as hung%n", STALL_SECONDS, stalledRuns);
          break;
        }
        Thread.sleep(10);
      }
      // Let the jobs record their end, then stop the worker as an operator would.
      Thread.sleep(2000);
      if (worker != null) {
        worker.process.getOutputStream().close();
        if (!worker.process.waitFor(60, TimeUnit.SECONDS)) {
          worker.process.destroyForcibly();
          crashed++;
        } else if (worker.process.exitValue() != 0) {
          crashed++;
        }
        worker.join();
        worker = null;
      }
    } finally {
      if (worker != null) {
        worker.process.destroyForcibly();
      }
    }
    double elapsed = seconds(t0);

    // What the jobs wrote, read by this JVM; and what is left in the journal.
    Tally tally = readOutputs(dir, seed, perJob);
    String journalRows = journalRows(url);
    long ackedTwice = acks.values().stream().filter(n -> n > 1).count();
    long ackedMissing = acks.keySet().stream().filter(k -> !tally.recorded.containsKey(k)).count();
    long lost = tally.missing; // an acknowledged item missing from the output is among these
    long duplicated = tally.twice + ackedTwice;
    long hung = tally.byOutcome.getOrDefault(Outcome.HUNG, 0L) + stalledRuns;
    String growth = rssAt90 < 0 || rssAtEnd < 0 ? "nan" : String.format(Locale.ROOT, "%.1f", (rssAtEnd - rssAt90) / 1024.0);

    System.out.printf(Locale.ROOT, "soak: %d runs in %.0f s (%.0f runs/s), %d kills, %d worker JVMs, seed %d%n",
        runs, elapsed, runs / elapsed, killed, generation, seed);
    System.out.println("| fault    | runs   | expected outcome | got it | other outcome |");
    System.out.println("|----------|-------:|------------------|-------:|--------------:|");
    for (Kind kind : Kind.values()) {
      long[] k = tally.byKind.getOrDefault(kind, new long[2]);
      System.out.printf(Locale.ROOT, "| %-8s | %6d | %-16s | %6d | %13d |%n", kind, k[0] + k[1], expected(kind), k[0], k[1]);
    }
    System.out.printf(Locale.ROOT, "outcomes recorded: %s; runs without one: %d (%d of them acknowledged before);"
        + " acknowledged twice: %d; journal: %s; journal file %s MB at 90%% of the runs, %s MB at the end, %.3f MB once"
        + " closed%n", tally.byOutcome, tally.missing, ackedMissing, ackedTwice, journalRows, megabytes(fileAt90),
        megabytes(fileAtEnd), Files.size(dir.resolve("journal.mv.db")) / 1e6);
    System.out.printf(Locale.ROOT, "worker RSS: %s MB at 90%% of the runs, %s MB at the end%n",
        rssAt90 < 0 ? "?" : String.format(Locale.ROOT, "%.1f", rssAt90 / 1024.0),
        rssAtEnd < 0 ? "?" : String.format(Locale.ROOT, "%.1f", rssAtEnd / 1024.0));
    System.out.printf(Locale.ROOT, "RESULT soak runs=%d lost=%d duplicated=%d hung=%d crashed=%d rss_growth_mb=%s wrong=%d%n",
        runs, lost, duplicated, hung, crashed, growth, tally.wrong);
    boolean clean = lost == 0 && duplicated == 0 && hung == 0 && crashed == 0 && tally.wrong == 0;
    if (clean) {
      deleteTree(dir);
    } else {
      System.err.println("soak: kept " + dir + " (journal and worker logs) for a look");
    }
    return clean ? 0 : 1;
  }

  private static long sizeOrMinusOne(Path file) {
    try {
      return Files.size(file);
    } catch (IOException e) {
      return -1;
    }
  }

  private static String megabytes(long bytes) {
    return bytes < 0 ? "?" : String.format(Locale.ROOT, "%.1f", bytes / 1e6);
  }

  private static double seconds(long t0) {
    return (System.nanoTime() - t0) / 1e9;
  }

  private static boolean allOutputs(Path dir) {
    for (int j = 0; j < JOBS; j++) {
      if (!Files.exists(dir.resolve(jobId(j) + ".tsv"))) {
        return false;
      }
    }
    return true;
  }

  static String jobId(int job) {
    return "soak-" + job;
  }

  /** Resident set size of process {@code pid} in KiB, from /proc (Linux). */
  private static long rssKb(long pid) {
    try {
      for (String line : Files.readAllLines(Path.of("/proc", Long.toString(pid), "status"))) {
        if (line.startsWith("VmRSS:")) {
          return Long.parseLong(line.replaceAll("[^0-9]", ""));
        }
      }
    } catch (IOException | NumberFormatException e) {
      // gone or not Linux
    }
    return -1;
  }

  /** What the jobs' output files hold. */
  private static final class Tally {
    final Map<String, Integer> recorded = new HashMap<>();
    final Map<Kind, long[]> byKind = new HashMap<>();
    final Map<Outcome, Long> byOutcome = new java.util.EnumMap<>(Outcome.class);
    long missing;
    long twice;
    long wrong;
  }

  /**
   * The tally of the jobs' output files (an ended job's items are there: the journal keeps only its
   * JobEnded and the snapshot at it); a job without a readable output file loses every run of it (H2's
   * default WRITE_DELAY once left "File corrupted" and no job could finish).
   */
  private static Tally readOutputs(Path dir, long seed, long perJob) {
    Tally tally = new Tally();
    for (int j = 0; j < JOBS; j++) {
      Path output = dir.resolve(jobId(j) + ".tsv");
      Map<Long, String> lines;
      try {
        lines = ResultJournal.read(output);
        // The file holds an item once (written from the job's state, keyed by item): a line more is a duplicate.
        tally.twice += Math.max(0, Files.readAllLines(output).size() - lines.size());
      } catch (IOException | XlaException e) {
        System.err.println("soak: the output of " + jobId(j) + " cannot be read: " + e.getMessage());
        lines = Map.of();
      }
      for (Map.Entry<Long, String> line : lines.entrySet()) {
        long item = line.getKey();
        tally.recorded.put(jobId(j) + " " + item, 1);
        Kind kind = Kind.of(seed, j, item);
        Outcome outcome = decode(line.getValue(), item, kind);
        tally.byOutcome.merge(outcome, 1L, Long::sum);
        boolean right = outcome == expected(kind);
        tally.byKind.computeIfAbsent(kind, k -> new long[2])[right ? 0 : 1]++;
        if (!right && outcome != Outcome.HUNG) {
          tally.wrong++;
        }
      }
      for (long i = 0; i < perJob; i++) {
        if (!tally.recorded.containsKey(jobId(j) + " " + i)) {
          tally.missing++;
        }
      }
    }
    return tally;
  }

  /** The journal's event and snapshot rows (every persistence id), or "?" when it cannot be read. */
  private static String journalRows(String url) {
    try (Connection connection = DriverManager.getConnection(url, "sa", "");
        Statement statement = connection.createStatement()) {
      long[] counts = new long[2];
      String[] tables = {"\"event_journal\"", "\"snapshot\""};
      for (int t = 0; t < 2; t++) {
        try (ResultSet rows = statement.executeQuery("SELECT COUNT(*) FROM " + tables[t])) {
          rows.next();
          counts[t] = rows.getLong(1);
        }
      }
      return (counts[0] + counts[1]) + " rows (" + counts[0] + " events, " + counts[1] + " snapshots)";
    } catch (java.sql.SQLException e) {
      return "? rows (" + e.getMessage() + ")";
    }
  }

  /**
   * The outcome an item's line records: the step is 2x + 1 over [outcome, item, kind, check], where check
   * is 1 when a successful run's answer had the right values.
   */
  private static Outcome decode(String line, long item, Kind kind) {
    String[] v = line.split(",");
    int outcome = (int) ((Float.parseFloat(v[0]) - 1) / 2);
    long index = (long) ((Double.parseDouble(v[1]) - 1) / 2);
    int k = (int) ((Float.parseFloat(v[2]) - 1) / 2);
    int check = (int) ((Float.parseFloat(v[3]) - 1) / 2);
    if (index != item || k != kind.ordinal() || outcome < 0 || outcome >= Outcome.values().length) {
      return Outcome.OTHER;
    }
    Outcome o = Outcome.values()[outcome];
    return o == Outcome.SUCCEEDED && check != 1 ? Outcome.OTHER : o;
  }

  private static void deleteTree(Path dir) throws IOException {
    try (var paths = Files.walk(dir)) {
      paths.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    }
  }

  /** A worker JVM and the thread reading its output. */
  private static final class Worker {
    final Process process;
    final Thread reader;
    final Path log;
    final AtomicLong lastProgress = new AtomicLong(System.nanoTime());

    private Worker(Process process, Path log, Map<String, Integer> acks) throws IOException {
      this.process = process;
      this.log = log;
      PrintWriter out = new PrintWriter(Files.newBufferedWriter(log, StandardCharsets.UTF_8), true);
      BufferedReader in = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
      this.reader = new Thread(() -> {
        try (out; in) {
          String line;
          while ((line = in.readLine()) != null) {
            if (line.startsWith("ACK ")) {
              String[] f = line.split(" ");
              acks.merge(f[1] + " " + f[2], 1, Integer::sum);
              lastProgress.set(System.nanoTime());
            } else {
              out.println(line);
            }
          }
        } catch (IOException e) {
          // the worker died mid-line: what it wrote before is counted
        }
      }, "soak-worker-output");
      reader.setDaemon(true);
      reader.start();
    }

    static Worker start(int generation, String url, long seed, long perJob, Path dir, Map<String, Integer> acks)
        throws IOException {
      int port;
      try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
        port = s.getLocalPort();
      }
      Process process = new ProcessBuilder(
              Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-Xmx384m", "-Dh2.bindAddress=127.0.0.1",
              "-cp", System.getProperty("java.class.path"), SoakBench.class.getName(), "worker",
              Integer.toString(port), url, Long.toString(seed), Long.toString(perJob), dir.toString())
          .redirectErrorStream(true)
          .start();
      Runtime.getRuntime().addShutdownHook(new Thread(process::destroyForcibly));
      return new Worker(process, dir.resolve("worker-" + generation + ".log"), acks);
    }

    void join() throws InterruptedException {
      reader.join(TimeUnit.SECONDS.toMillis(30));
    }
  }

  // ---------------------------------------------------------------------------------------------
  // The worker

  private static Config workerConfig(int port, String url) {
    return ConfigFactory.parseString("""
            xla-actors.cluster {
              seed-nodes = ["127.0.0.1:%d"], hostname = "127.0.0.1", port = %d, roles = [compute]
              jobs.journal.url = "%s"
            }
            xla-actors.actors.callbacks.default-timeout = %dms
            xla-actors.actors.callbacks.timeouts { "%s" = %dms }
            xla-actors.actors.metrics.log = off
            pekko.loglevel = WARNING
            pekko.actor.allow-java-serialization = off
            pekko.coordinated-shutdown.run-by-jvm-shutdown-hook = off
            """.formatted(port, port, url, CALLBACK_DEFAULT_TIMEOUT_MS, SLOW_CALLBACK, CALLBACK_TIMEOUT_MS))
        .withFallback(ConfigFactory.load());
  }

  /**
   * The callback of every run: its input is [item, 0, kind, 0]; OK answers input + 1, FAIL throws, TIMEOUT
   * (the slow callback, timed out after {@link #CALLBACK_TIMEOUT_MS}) and CANCEL wait until the timeout or
   * the cancel interrupts them (30 s at most, which is also the other callback's timeout).
   */
  private static HostCallback callback(String name) {
    return new HostCallback(name, List.of(ITEM), null, (in, s) -> {
      float[] x = in.get(0).toFloatArray();
      Kind kind = Kind.values()[(int) x[2]];
      switch (kind) {
        case FAIL -> throw new IllegalStateException("soak: injected failure");
        case TIMEOUT, CANCEL -> Thread.sleep(30_000);
        default -> { }
      }
      for (int i = 0; i < x.length; i++) {
        x[i] += 1;
      }
      return List.of(HostTensor.ofFloats(x, 4));
    });
  }

  private static void worker(int port, String url, long seed, long perJob, Path dir) throws Exception {
    ActorSystem<Void> system = XlaCluster.start(workerConfig(port, url));
    XlaClient client = XlaClient.create();
    CallbackRuntime runtime = CallbackRuntime.create(system, client);
    Model program = program(runtime, client, callback(CALLBACK));
    Model slowProgram = program(runtime, client, callback(SLOW_CALLBACK));
    GraphBuilder s = new GraphBuilder("soak_step");
    Value y = s.parameter(ITEM);
    Program step = Program.of(s.build(s.add(s.multiply(y, s.constant(2f)), s.constant(1f))));

    Map<String, ShardedBatchJobs.Definition> jobs = new HashMap<>();
    for (int j = 0; j < JOBS; j++) {
      int job = j;
      jobs.put(jobId(j), new ShardedBatchJobs.Definition(step, perJob,
          i -> List.of(HostTensor.ofFloats(runOnce(runtime, program, slowProgram, seed, job, i), 4)),
          dir.resolve(jobId(j) + ".tsv"),
          (i, outputs) -> {
            System.out.println("ACK " + jobId(job) + " " + i);
          }));
    }
    var region = ShardedBatchJobs.init(system, "compute", client, id -> Optional.ofNullable(jobs.get(id)));
    for (String id : jobs.keySet()) {
      region.tell(new ShardingEnvelope<>(id, new ShardedBatchJobs.Ensure()));
    }
    System.out.println("READY worker on port " + port);
    System.out.flush();
    while (System.in.read() >= 0) {
      // lives until the driver closes the pipe (or dies)
    }
    System.out.flush();
    System.exit(0);
  }

  /** The program of a run: its input through {@code callback}, registered with {@code runtime}. */
  private static Model program(CallbackRuntime runtime, XlaClient client, HostCallback callback) throws Exception {
    runtime.register(callback).toCompletableFuture().get(60, TimeUnit.SECONDS);
    GraphBuilder b = new GraphBuilder("soak_run");
    Value x = b.parameter(ITEM);
    try (Executable exe = b.build(b.hostCall(callback, x).get(0)).compile(client)) {
      return Model.of(exe);
    }
  }

  /** One run with its fault; returns [outcome, item, kind, check] (check 1: a success had the right values). */
  private static float[] runOnce(CallbackRuntime runtime, Model program, Model slowProgram, long seed, int job,
      long item) {
    Kind kind = Kind.of(seed, job, item);
    HostTensor input = HostTensor.ofFloats(new float[] {item, 0, kind.ordinal(), 0}, 4);
    RunHandle run = runtime.start(kind == Kind.TIMEOUT ? slowProgram : program, Argument.of(List.of(input)));
    if (kind == Kind.CANCEL) {
      run.cancel("soak: injected cancel");
    }
    Outcome outcome;
    int check = 0;
    try {
      long timeoutMs = kind == Kind.TIMEOUT ? CALLBACK_TIMEOUT_MS : CALLBACK_DEFAULT_TIMEOUT_MS;
      float[] out = run.result().toCompletableFuture().get(timeoutMs + HUNG_MARGIN_MS, TimeUnit.MILLISECONDS)
          .get(0).toFloatArray();
      outcome = Outcome.SUCCEEDED;
      check = out[0] == item + 1 && out[1] == 1 && out[2] == kind.ordinal() + 1 && out[3] == 1 ? 1 : 0;
    } catch (TimeoutException e) {
      outcome = Outcome.HUNG;
      System.out.println("HUNG " + jobId(job) + " " + item + " " + kind);
      run.cancel("soak: hung");
    } catch (ExecutionException | CompletionException e) {
      outcome = classify(e.getCause(), kind);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      outcome = Outcome.OTHER;
    }
    if (outcome == Outcome.OTHER) {
      System.out.println("OTHER " + jobId(job) + " " + item + " " + kind);
    }
    return new float[] {outcome.ordinal(), item, kind.ordinal(), check};
  }

  private static Outcome classify(Throwable failure, Kind kind) {
    Throwable t = failure;
    while (t instanceof CompletionException && t.getCause() != null) {
      t = t.getCause();
    }
    if (!(t instanceof XlaException x)) {
      System.out.println("UNEXPECTED " + kind + " " + t);
      return Outcome.OTHER;
    }
    if (x.code() == ErrorCode.CANCELLED) {
      return Outcome.CANCELLED;
    }
    if (x.code() == ErrorCode.DEADLINE_EXCEEDED) {
      return Outcome.TIMED_OUT;
    }
    if (String.valueOf(x.getMessage()).contains("soak: injected failure")) {
      return Outcome.FAILED;
    }
    System.out.println("UNEXPECTED " + kind + " " + x.code() + " " + x.getMessage());
    return Outcome.OTHER;
  }
}
