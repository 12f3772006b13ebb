package dev.xlaactors.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import com.typesafe.config.ConfigFactory;
import java.io.Serializable;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorRefResolver;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Adapter;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.slf4j.LoggerFactory;

/**
 * A peer that sends a Java-serialized message (here a JVM with Java serialization on, as an old or
 * hostile peer would be): the node refuses it with one log event (Artery's, naming the peer) whose cause
 * says why and has no stack trace, and nothing else; the message never reaches its actor. Before
 * RefusingJavaSerializer, Pekko also logged a warning that did not name the peer. Two actor systems in this JVM over Artery TCP on loopback.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class JavaSerializedPeerMessageTest {
  /** A message only Java serialization can carry. */
  record Sneaky(String payload) implements Serializable {}

  private static ActorSystem<Void> node;
  private static ActorSystem<Void> peer;

  @BeforeAll
  static void start() {
    String remote = """
        pekko.actor.provider = remote
        pekko.remote.artery.canonical.hostname = "127.0.0.1"
        pekko.remote.artery.canonical.port = 0
        pekko.coordinated-shutdown.run-by-jvm-shutdown-hook = off
        """;
    node = ActorSystem.create(Behaviors.empty(), "xla-actors", ConfigFactory.parseString(remote).withFallback(ConfigFactory.load()));
    peer = ActorSystem.create(Behaviors.empty(), "xla-actors", ConfigFactory.parseString(remote + """
        pekko.actor.allow-java-serialization = on
        pekko.actor.warn-about-java-serializer-usage = off
        """).withFallback(ConfigFactory.load()));
  }

  @AfterAll
  static void stop() throws Exception {
    for (ActorSystem<Void> s : List.of(peer, node)) {
      s.terminate();
      s.getWhenTerminated().toCompletableFuture().get(30, TimeUnit.SECONDS);
    }
  }

  @Test
  void aJavaSerializedMessageIsRefusedWithOneLineNamingThePeer() throws Exception {
    ListAppender<ILoggingEvent> log = new ListAppender<>();
    log.start();
    Logger root = (Logger) LoggerFactory.getLogger(org.slf4j.Logger.ROOT_LOGGER_NAME);
    root.addAppender(log);
    try {
      TestProbe<Object> target = TestProbe.create(node);
      ActorRef<Object> there = ActorRefResolver.get(peer).resolveActorRef(ActorRefResolver.get(node).toSerializationFormat(target.getRef()));
      Adapter.toClassic(there).tell(new Sneaky("let me in"), org.apache.pekko.actor.ActorRef.noSender());
      target.expectNoMessage(Duration.ofSeconds(3));
    } finally {
      root.detachAppender(log);
    }
    String peerAddress = peer.address().toString();
    List<ILoggingEvent> aboutIt = log.list.stream()
        .filter(e -> e.getLevel().isGreaterOrEqual(ch.qos.logback.classic.Level.WARN))
        .toList();
    // Pekko's Artery logs the one event; the refusal rides on it without a single stack frame.
    assertEquals(1, aboutIt.size(), () -> aboutIt.stream().map(e -> e.getLoggerName() + ": " + e.getFormattedMessage()).toList().toString());
    ILoggingEvent line = aboutIt.get(0);
    assertEquals("Failed to deserialize message from [" + peerAddress + "] with serializer id [1] and manifest [].",
        line.getFormattedMessage());
    assertEquals(RefusingJavaSerializer.Refused.class.getName(), line.getThrowableProxy().getClassName());
    assertEquals(0, line.getThrowableProxy().getStackTraceElementProxyArray().length, "no stack trace");
    assertTrue(line.getThrowableProxy().getMessage().matches("refused a Java-serialized message of \\d+ bytes: Java serialization"
        + " is off \\(pekko.actor.allow-java-serialization = off\\); the message was dropped"), line.getThrowableProxy().getMessage());
    System.err.printf("java-serialized peer message: logged %s %s | %s: %s%n", line.getLevel(), line.getFormattedMessage(),
        line.getThrowableProxy().getClassName(), line.getThrowableProxy().getMessage());
  }
}
