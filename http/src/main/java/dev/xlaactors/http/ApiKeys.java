package dev.xlaactors.http;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.XlaException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.http.javadsl.model.ContentTypes;
import org.apache.pekko.http.javadsl.model.HttpEntities;
import org.apache.pekko.http.javadsl.model.HttpHeader;
import org.apache.pekko.http.javadsl.model.HttpRequest;
import org.apache.pekko.http.javadsl.model.HttpResponse;
import org.apache.pekko.http.javadsl.model.StatusCodes;
import org.apache.pekko.http.javadsl.model.headers.HttpChallenge;
import org.apache.pekko.http.javadsl.model.headers.WWWAuthenticate;
import org.apache.pekko.http.javadsl.server.AllDirectives;
import org.apache.pekko.http.javadsl.server.Route;

/**
 * The API keys a client must show to use the HTTP routes ({@code xla-actors.http.api-key} and {@code
 * api-keys-file}, or {@code serve --api-key}): sent as {@code Authorization: Bearer <key>}, as OpenAI's clients
 * send their {@code api_key}. Only the keys' SHA-256 digests are kept, so neither a log line nor a heap dump
 * of the settings shows a key. A presented key is compared with every key in constant time (digests compared
 * with {@link MessageDigest#isEqual}, all of them, whatever matched), so the time taken says nothing about how
 * much of a key was right.
 *
 * <p>{@link #guard} puts the check in front of a route tree. Open without a key: the probes of an
 * orchestrator, {@link #OPEN} ({@code /health}, {@code /ready}, {@code /v2/health/live}, {@code
 * /v2/health/ready}); every other path, unknown ones included, answers 401 without one, in the error shape of
 * the protocol the path belongs to (OpenAI's {@code {"error": {..., "code": "invalid_api_key"}}} under {@code
 * /v1} but the project's own routes, the Open Inference Protocol's {@code {"error"}} under {@code /v2}, ours
 * {@code {"error", "code": "UNAUTHENTICATED"}} elsewhere), with {@code WWW-Authenticate: Bearer}. No keys:
 * every route is open. Immutable.
 */
public final class ApiKeys extends AllDirectives {
  /** The paths answered without a key: liveness and readiness probes, which carry no credentials. */
  public static final Set<String> OPEN = Set.of("/health", "/ready", "/v2/health/live", "/v2/health/ready");
  private static final String ROOT = HttpSettings.ROOT;
  private static final int MAX_KEY_LENGTH = 1024;
  private static final ApiKeys NONE = new ApiKeys(List.of());

  private final List<byte[]> digests;

  private ApiKeys(List<byte[]> digests) {
    this.digests = digests;
  }

  /** No keys: every route is open. */
  public static ApiKeys none() {
    return NONE;
  }

  /**
   * These keys; each must be 1 to 1024 printable ASCII characters without spaces (what a header carries
   * unchanged). An empty collection is {@link #none()}.
   */
  public static ApiKeys of(Collection<String> keys) {
    return of(keys, "api key");
  }

  private static ApiKeys of(Collection<String> keys, String source) {
    List<byte[]> digests = new ArrayList<>();
    for (String key : keys) {
      check(key, source);
      digests.add(sha256(key));
    }
    return digests.isEmpty() ? NONE : new ApiKeys(List.copyOf(digests));
  }

  /** The keys of the actor system's config ({@code xla-actors.http.api-key} and {@code api-keys-file}). */
  public static ApiKeys create(ActorSystem<?> system) {
    return fromConfig(system.settings().config());
  }

  /**
   * The keys of {@code config}: {@code xla-actors.http.api-key} (one key; empty: none) and every non-blank
   * line of the file {@code xla-actors.http.api-keys-file} (empty: none) but those starting with {@code #}.
   * A missing or unreadable file, or a key with a space or a control character, is refused naming the key
   * (or the file and line), never the key itself.
   */
  public static ApiKeys fromConfig(Config config) {
    List<String> keys = new ArrayList<>();
    String file;
    try {
      Config c = config.getConfig(ROOT);
      String key = c.getString("api-key");
      if (!key.isEmpty()) {
        check(key, ROOT + ".api-key");
        keys.add(key);
      }
      file = c.getString("api-keys-file");
    } catch (ConfigException e) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, "bad configuration under " + ROOT + ": " + e.getMessage(), e);
    }
    if (!file.isEmpty()) {
      keys.addAll(readFile(Path.of(file), ROOT + ".api-keys-file"));
    }
    return of(keys, ROOT + ".api-key");
  }

  /**
   * The keys of {@code file}, one a line; blank lines and lines starting with {@code #} are skipped. {@code
   * setting} names where the file was given, for the error.
   */
  public static List<String> readFile(Path file, String setting) {
    List<String> lines;
    try {
      lines = Files.readAllLines(file, StandardCharsets.UTF_8);
    } catch (IOException e) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, setting + " = " + file + ": cannot read it (" + e
          + "); give a readable file with one API key a line", e);
    }
    List<String> keys = new ArrayList<>();
    for (int i = 0; i < lines.size(); i++) {
      String line = lines.get(i).strip();
      if (!line.isEmpty() && !line.startsWith("#")) {
        check(line, setting + " " + file + " line " + (i + 1));
        keys.add(line);
      }
    }
    if (keys.isEmpty()) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, setting + " = " + file + " holds no key; write one API key a line,"
          + " or leave the setting empty to serve without keys");
    }
    return keys;
  }

  /** Whether any key is required. */
  public boolean required() {
    return !digests.isEmpty();
  }

  /** How many keys there are. */
  public int count() {
    return digests.size();
  }

  /** These keys and {@code other}'s. */
  public ApiKeys and(ApiKeys other) {
    List<byte[]> all = new ArrayList<>(digests);
    all.addAll(other.digests);
    return all.isEmpty() ? NONE : new ApiKeys(List.copyOf(all));
  }

  /** Whether {@code authorization} (an {@code Authorization} header's value, or null) shows one of the keys. */
  boolean accepts(String authorization) {
    if (digests.isEmpty()) {
      return true;
    }
    if (authorization == null || authorization.length() < 7
        || !authorization.substring(0, 7).toLowerCase(Locale.ROOT).equals("bearer ")) {
      return false;
    }
    byte[] presented = sha256(authorization.substring(7).strip());
    boolean match = false;
    for (byte[] digest : digests) {
      match |= MessageDigest.isEqual(digest, presented); // every digest compared: no early exit
    }
    return match;
  }

  /** {@code route} behind the key check: requests to {@link #OPEN} paths, or showing a key, reach it; others get 401. */
  public Route guard(Route route) {
    if (digests.isEmpty()) {
      return route;
    }
    return extractRequest(request -> {
      String path = request.getUri().path();
      if (OPEN.contains(path) || accepts(request.getHeader("Authorization").map(HttpHeader::value).orElse(null))) {
        return route;
      }
      return complete(unauthorized(request));
    });
  }

  /** 401 in the error shape of the protocol {@code request}'s path belongs to. */
  static HttpResponse unauthorized(HttpRequest request) {
    String path = request.getUri().path();
    boolean shown = request.getHeader("Authorization").isPresent();
    String message = (shown ? "the API key in the Authorization header is not one of this server's"
        : "this server requires an API key: send the header 'Authorization: Bearer <key>'")
        + " (xla-actors.http.api-key, api-keys-file, serve --api-key; " + String.join(", ", OPEN.stream().sorted().toList())
        + " need none)";
    byte[] body;
    if (path.startsWith("/v2")) {
      body = TensorJson.object(g -> g.writeStringField("error", message));
    } else if (openAiPath(path)) {
      body = new OpenAiError(401, OpenAiError.INVALID_REQUEST, null, "invalid_api_key", message).body();
    } else {
      body = TensorJson.object(g -> {
        g.writeStringField("error", message);
        g.writeStringField("code", ErrorCode.UNAUTHENTICATED.name());
      });
    }
    return HttpResponse.create().withStatus(StatusCodes.UNAUTHORIZED)
        .addHeader(WWWAuthenticate.create(HttpChallenge.create("Bearer", "xla-actors")))
        .withEntity(HttpEntities.create(ContentTypes.APPLICATION_JSON, body));
  }

  /** The OpenAI API's paths: {@code /v1/...} but the project's own {@code /v1/endpoints} and {@code /v1/models/<name>/generate}. */
  static boolean openAiPath(String path) {
    return path.startsWith("/v1/") && !path.equals("/v1/endpoints") && !(path.startsWith("/v1/models/") && path.endsWith("/generate"));
  }

  /** Says how many keys, never which. */
  @Override
  public String toString() {
    return "ApiKeys[" + digests.size() + " keys]";
  }

  private static void check(String key, String where) {
    if (key == null || key.isEmpty() || key.length() > MAX_KEY_LENGTH) {
      throw new XlaException(ErrorCode.INVALID_ARGUMENT, where + ": an API key must be 1 to " + MAX_KEY_LENGTH + " characters, got "
          + (key == null ? "none" : key.length()));
    }
    for (int i = 0; i < key.length(); i++) {
      char ch = key.charAt(i);
      if (ch <= ' ' || ch > '~') {
        // Never the key itself in the message: it may be a real one with a stray character.
        throw new XlaException(ErrorCode.INVALID_ARGUMENT, where + ": an API key must be printable ASCII without spaces (a header"
            + " carries it as it is), got character U+" + String.format("%04X", (int) ch) + " at position " + (i + 1));
      }
    }
  }

  private static byte[] sha256(String key) {
    try {
      return MessageDigest.getInstance("SHA-256").digest(key.getBytes(StandardCharsets.UTF_8));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("every JVM has SHA-256", e);
    }
  }
}
