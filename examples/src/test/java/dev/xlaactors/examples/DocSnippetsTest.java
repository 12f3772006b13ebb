package dev.xlaactors.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.File;
import java.io.IOException;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import javax.tools.JavaCompiler;
import javax.tools.JavaFileObject;
import javax.tools.StandardJavaFileManager;
import javax.tools.ToolProvider;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * Every {@code ```java} block of README.md and docs/*.md, compiled against the project's classes; the
 * complete programs (a class with a {@code main}) also run in a child JVM, which must exit 0 within two
 * minutes (so a program that leaves an actor system running fails), and print every line of the {@code
 * ```text} block that follows them, if any.
 *
 * <p>A block that is not a complete program must be marked by a line {@code <!-- fragment -->} just before
 * it; {@code <!-- fragment: XlaClient gpu; Value v; -->} names the variables it uses without declaring
 * them. A fragment is compiled (never run) as the body of a method of a class that declares those
 * variables and {@code client}, {@code callbacks} and {@code system} as fields, with the project's
 * packages imported.
 */
class DocSnippetsTest {
  private static final Path ROOT = Path.of("..").toAbsolutePath().normalize();
  private static final Pattern FRAGMENT = Pattern.compile("<!--\\s*fragment(?::(.*?))?\\s*-->");
  private static final Pattern CLASS_NAME = Pattern.compile("(?m)^(?:public\\s+)?(?:final\\s+)?class\\s+(\\w+)");
  private static final String FRAGMENT_IMPORTS =
      """
      import dev.xlaactors.actors.*;
      import dev.xlaactors.actors.jobs.*;
      import dev.xlaactors.actors.serve.*;
      import dev.xlaactors.cluster.*;
      import dev.xlaactors.error.*;
      import dev.xlaactors.examples.gpt.*;
      import dev.xlaactors.graph.*;
      import dev.xlaactors.http.*;
      import dev.xlaactors.runtime.*;
      import dev.xlaactors.runtime.model.*;
      import java.nio.file.*;
      import java.time.Duration;
      import java.util.*;
      import java.util.concurrent.*;
      import org.apache.pekko.actor.typed.*;
      import org.apache.pekko.actor.typed.javadsl.*;
      """;

  /** One java block: where it is, its code, its fragment declarations (null: a complete program), its expected output. */
  record Snippet(String where, String code, String declarations, List<String> expectedOutput) {
    boolean complete() {
      return declarations == null;
    }
  }

  static List<Snippet> snippets() throws IOException {
    List<Path> files = new ArrayList<>();
    files.add(ROOT.resolve("README.md"));
    try (Stream<Path> docs = Files.list(ROOT.resolve("docs"))) {
      docs.filter(p -> p.toString().endsWith(".md")).sorted().forEach(files::add);
    }
    List<Snippet> snippets = new ArrayList<>();
    for (Path file : files) {
      List<String> lines = Files.readAllLines(file, StandardCharsets.UTF_8);
      for (int i = 0; i < lines.size(); i++) {
        if (!lines.get(i).strip().equals("```java")) {
          continue;
        }
        String where = ROOT.relativize(file) + ":" + (i + 1);
        int previous = i - 1;
        while (previous >= 0 && lines.get(previous).isBlank()) {
          previous--;
        }
        Matcher marker = previous >= 0 ? FRAGMENT.matcher(lines.get(previous).strip()) : null;
        int end = i + 1;
        while (end < lines.size() && !lines.get(end).strip().startsWith("```")) {
          end++;
        }
        String code = String.join("\n", lines.subList(i + 1, end)) + "\n";
        List<String> expected = new ArrayList<>();
        int next = end + 1;
        while (next < lines.size() && lines.get(next).isBlank()) {
          next++;
        }
        if (next < lines.size() && lines.get(next).strip().equals("```text")) {
          for (int j = next + 1; j < lines.size() && !lines.get(j).strip().startsWith("```"); j++) {
            expected.add(lines.get(j).strip());
          }
        }
        boolean fragment = marker != null && marker.matches();
        boolean program = code.contains("static void main(");
        if (!fragment && !program) {
          fail(where + ": a java block must be a complete program (a class with main) or be marked by a line"
              + " <!-- fragment --> (or <!-- fragment: Type name; ... -->) just before it");
        }
        String declarations = fragment ? (marker.group(1) == null ? "" : marker.group(1).strip()) : null;
        snippets.add(new Snippet(where, code, declarations, expected));
        i = end;
      }
    }
    return snippets;
  }

  @Test
  void theReadmeHasThreeCompletePrograms() throws IOException {
    long programs = snippets().stream().filter(s -> s.where().startsWith("README.md") && s.complete()).count();
    assertEquals(3, programs, "README.md's programs: a computation, a callback, a supervised job");
  }

  @TestFactory
  Stream<DynamicTest> everyJavaBlockCompilesAndEveryProgramRuns() throws IOException {
    return snippets().stream().map(s -> DynamicTest.dynamicTest(s.where(), () -> check(s)));
  }

  private static void check(Snippet snippet) throws Exception {
    Path dir = Files.createTempDirectory("doc-snippet");
    try {
      String className;
      String source;
      if (snippet.complete()) {
        Matcher m = CLASS_NAME.matcher(snippet.code());
        assertTrue(m.find(), snippet.where() + ": no class declaration in a program with main");
        className = m.group(1);
        source = snippet.code();
      } else {
        className = "Fragment";
        source = fragmentSource(snippet);
      }
      compile(snippet, dir, className, source);
      if (snippet.complete()) {
        run(snippet, dir, className);
      }
    } finally {
      try (Stream<Path> files = Files.walk(dir)) {
        files.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
      }
    }
  }

  private static String fragmentSource(Snippet snippet) {
    StringBuilder imports = new StringBuilder(FRAGMENT_IMPORTS);
    StringBuilder body = new StringBuilder();
    for (String line : snippet.code().split("\n", -1)) {
      (line.startsWith("import ") ? imports : body).append(line).append('\n');
    }
    StringBuilder fields = new StringBuilder();
    for (String declaration : snippet.declarations().split(";")) {
      if (!declaration.isBlank()) {
        fields.append("  ").append(declaration.strip()).append(";\n");
      }
    }
    String declared = " " + snippet.declarations().replace(',', ' ').replace(';', ' ') + " ";
    for (String[] field : new String[][] {
        {"XlaClient", "client"}, {"CallbackRuntime", "callbacks"}, {"ActorSystem<Void>", "system"}}) {
      if (!declared.contains(" " + field[1] + " ")) {
        fields.append("  ").append(field[0]).append(' ').append(field[1]).append(";\n");
      }
    }
    return imports + "\nclass Fragment {\n" + fields + "\n  void run() throws Exception {\n" + body + "  }\n}\n";
  }

  private static void compile(Snippet snippet, Path dir, String className, String source) throws IOException {
    Path file = dir.resolve(className + ".java");
    Files.writeString(file, source, StandardCharsets.UTF_8);
    JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
    StringWriter diagnostics = new StringWriter();
    try (StandardJavaFileManager files = javac.getStandardFileManager(null, null, StandardCharsets.UTF_8)) {
      Iterable<? extends JavaFileObject> units = files.getJavaFileObjects(file.toFile());
      List<String> options = List.of("-classpath", classpath(), "-d", dir.toString(), "-proc:none", "-Xlint:none");
      boolean ok = javac.getTask(diagnostics, files, null, options, null, units).call();
      if (!ok) {
        fail(snippet.where() + " does not compile:\n" + diagnostics + "\nas compiled:\n" + source);
      }
    } catch (UncheckedIOException e) {
      throw e.getCause();
    }
  }

  private static void run(Snippet snippet, Path dir, String className) throws Exception {
    Path log = dir.resolve("output.txt");
    Process process = new ProcessBuilder(
            Path.of(System.getProperty("java.home"), "bin", "java").toString(),
            "-cp", dir + File.pathSeparator + classpath(),
            "-Dlogback.configurationFile=" + ROOT.resolve("conf/logback.xml"),
            // What a program makes in the temporary folder (README's job writes its output there) is made in
            // this snippet's folder, which is deleted after it ran.
            "-Djava.io.tmpdir=" + dir,
            className)
        .directory(dir.toFile())
        .redirectErrorStream(true)
        .redirectOutput(log.toFile())
        .start();
    if (!process.waitFor(2, TimeUnit.MINUTES)) {
      process.destroyForcibly().waitFor();
      fail(snippet.where() + " did not exit within 2 minutes (a thread or actor system left running?); output:\n"
          + Files.readString(log));
    }
    String output = Files.readString(log);
    assertEquals(0, process.exitValue(), snippet.where() + " exited with " + process.exitValue() + "; output:\n" + output);
    List<String> printed = output.lines().map(String::strip).toList();
    for (String line : snippet.expectedOutput()) {
      assertTrue(printed.contains(line), snippet.where() + " should print '" + line + "'; it printed:\n" + output);
    }
  }

  /** The test classpath: surefire's own list when it runs the tests through a manifest-only jar. */
  private static String classpath() {
    return System.getProperty("surefire.test.class.path", System.getProperty("java.class.path"));
  }
}
