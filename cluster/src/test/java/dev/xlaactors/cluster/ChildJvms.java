package dev.xlaactors.cluster;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.pekko.actor.typed.ActorSystem;

/**
 * Child JVMs for tests: the test JVM's java and classpath, output to a file per child, each started
 * process destroyed on {@link #close} and, should the test JVM exit first, by a shutdown hook. Every
 * wait is bounded.
 */
final class ChildJvms implements AutoCloseable {
  private static final List<Process> ALL = new CopyOnWriteArrayList<>();

  static {
    Runtime.getRuntime().addShutdownHook(new Thread(() -> ALL.forEach(Process::destroyForcibly), "child-jvm-reaper"));
  }

  /** One started child. */
  record Child(String name, Process process, Path log) {
    /** The first group of the first line of output matching {@code pattern}, waiting up to {@code timeout}. */
    String await(Pattern pattern, Duration timeout) throws InterruptedException {
      long deadline = System.nanoTime() + timeout.toNanos();
      while (true) {
        String out = output();
        Matcher m = pattern.matcher(out);
        if (m.find()) {
          return m.groupCount() > 0 ? m.group(1) : m.group();
        }
        if (!process.isAlive()) {
          throw new AssertionError("child " + name + " exited (" + process.exitValue() + ") before printing "
              + pattern + ":\n" + out);
        }
        if (System.nanoTime() > deadline) {
          throw new AssertionError("child " + name + " did not print " + pattern + " within " + timeout + ":\n" + out);
        }
        Thread.sleep(50);
      }
    }

    String output() {
      try {
        return Files.exists(log) ? Files.readString(log) : "";
      } catch (IOException e) {
        return "(unreadable log " + log + ": " + e + ")";
      }
    }
  }

  private final Path dir;
  private final List<Child> children = new ArrayList<>();

  ChildJvms(Path dir) {
    this.dir = dir;
  }

  /** Starts {@code mainClass} with {@code args} in a new JVM. */
  Child start(String name, Class<?> mainClass, String... args) throws IOException {
    List<String> command = new ArrayList<>(List.of(
        Path.of(System.getProperty("java.home"), "bin", "java").toString(),
        // Small and quick to start: the children only serve callbacks.
        "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
        "-Dlogback.configurationFile=logback-child.xml",
        // An H2 journal served by one JVM to the others listens on loopback only.
        "-Dh2.bindAddress=127.0.0.1",
        "-cp", System.getProperty("java.class.path"),
        mainClass.getName()));
    command.addAll(List.of(args));
    Path log = dir.resolve(name + ".log");
    Process process = new ProcessBuilder(command).redirectErrorStream(true).redirectOutput(log.toFile()).start();
    ALL.add(process);
    Child child = new Child(name, process, log);
    children.add(child);
    return child;
  }

  /** Kills {@code child} at once (SIGKILL), as a crashed machine would vanish, and waits until it is gone. */
  static void kill(Child child) throws InterruptedException {
    child.process().destroyForcibly();
    if (!child.process().waitFor(10, TimeUnit.SECONDS)) {
      throw new AssertionError("child " + child.name() + " still alive 10 s after SIGKILL");
    }
  }

  /**
   * Terminates this JVM's own node {@code system} (when not null; up to 20 s), then stops the children: the node
   * leaves while they still live, which takes a gossip round or two; once they were killed, its leave would wait
   * for the failure detector and the split brain resolver to down them first.
   */
  void closeAfter(ActorSystem<?> system) throws Exception {
    try {
      if (system != null) {
        system.terminate();
        system.getWhenTerminated().toCompletableFuture().get(20, TimeUnit.SECONDS);
      }
    } finally {
      close();
    }
  }

  @Override
  public void close() throws InterruptedException {
    for (Child c : children) {
      c.process().destroyForcibly();
    }
    for (Child c : children) {
      c.process().waitFor(10, TimeUnit.SECONDS);
      ALL.remove(c.process());
    }
  }
}
