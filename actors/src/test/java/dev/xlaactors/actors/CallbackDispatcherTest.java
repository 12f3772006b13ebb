package dev.xlaactors.actors;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.runtime.DType;
import dev.xlaactors.runtime.HostFunction;
import dev.xlaactors.runtime.TensorType;
import java.util.List;
import org.apache.pekko.actor.testkit.typed.javadsl.ActorTestKit;
import org.apache.pekko.actor.testkit.typed.javadsl.TestProbe;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.pattern.StatusReply;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;

/** The dispatcher's registry protocol, with TestProbes as replyTo. */
class CallbackDispatcherTest {
  private static final ActorTestKit testKit = ActorTestKit.create();
  private static final List<TensorType> F32_4 = List.of(TensorType.of(DType.F32, 4));

  @AfterAll
  static void stop() {
    testKit.shutdownTestKit();
  }

  private static ActorRef<CallbackDispatcher.Command> dispatcher() {
    return testKit.spawn(CallbackDispatcher.create(new CallbackThreads("test-callbacks", 2, 0), new java.util.concurrent.atomic.AtomicReference<>(java.util.Map.of())));
  }

  private static CallbackId register(
      ActorRef<CallbackDispatcher.Command> d, String name, List<TensorType> template, Object staticArg, HostFunction f) {
    TestProbe<StatusReply<CallbackId>> probe = testKit.createTestProbe();
    d.tell(new CallbackDispatcher.Register(name, template, staticArg, f, probe.getRef()));
    StatusReply<CallbackId> reply = probe.receiveMessage();
    assertTrue(reply.isSuccess(), () -> "registration failed: " + reply.getError());
    return reply.getValue();
  }

  @Test
  void sameFunctionTemplateAndStaticArgumentGetTheSameId() {
    var d = dispatcher();
    HostFunction f = (in, s) -> in;
    CallbackId first = register(d, null, F32_4, "k", f);
    CallbackId again = register(d, null, F32_4, "k", f);
    assertEquals(first, again);
    assertEquals("callback-" + first.id(), first.name());
    assertNotEquals(first.id(), register(d, null, F32_4, "other", f).id(), "another static argument is another callback");
    assertNotEquals(first.id(), register(d, null, List.of(TensorType.of(DType.F32, 5)), "k", f).id());
    CallbackId named = register(d, "identity", F32_4, "k", f);
    assertEquals(first.id(), named.id(), "a name for an already registered callback shares its id");
    assertEquals("identity", named.name());
  }

  @Test
  void aNameTakenByAnotherCallbackIsRefused() {
    var d = dispatcher();
    register(d, "tokenize", F32_4, null, (in, s) -> in);
    TestProbe<StatusReply<CallbackId>> probe = testKit.createTestProbe();
    d.tell(new CallbackDispatcher.Register("tokenize", F32_4, null, (in, s) -> in, probe.getRef()));
    StatusReply<CallbackId> reply = probe.receiveMessage();
    assertTrue(reply.isError());
    assertTrue(reply.getError().getMessage().contains("'tokenize' is already registered"), reply.getError().getMessage());
  }

  @Test
  void listsRegisteredCallbacks() {
    var d = dispatcher();
    CallbackId a = register(d, "a", F32_4, null, (in, s) -> in);
    CallbackId b = register(d, "b", F32_4, null, (in, s) -> in);
    TestProbe<List<CallbackId>> probe = testKit.createTestProbe();
    d.tell(new CallbackDispatcher.ListCallbacks(probe.getRef()));
    List<CallbackId> listed = probe.receiveMessage();
    assertTrue(listed.containsAll(List.of(a, b)), listed.toString());
  }
}
