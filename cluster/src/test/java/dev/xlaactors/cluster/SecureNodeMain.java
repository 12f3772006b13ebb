package dev.xlaactors.cluster;

import com.typesafe.config.Config;
import com.typesafe.config.ConfigFactory;
import dev.xlaactors.runtime.HostTensor;
import java.nio.file.Path;
import java.util.List;
import org.apache.pekko.actor.typed.ActorRef;
import org.apache.pekko.actor.typed.ActorRefResolver;
import org.apache.pekko.actor.typed.ActorSystem;
import org.apache.pekko.actor.typed.javadsl.Behaviors;
import org.apache.pekko.cluster.MemberStatus;
import org.apache.pekko.cluster.typed.Cluster;

/**
 * A child JVM of {@link SecureClusterTest}, with the security settings of the file {@code conf}.
 * Arguments: {@code serve <node> <seedPort> <conf>}: a member serving {@link TestNodes#affine}; prints
 * {@code SERVER <ref>} (the server's address, for the intruders) and {@code READY <address>} once Up.
 * {@code intrude <node> <seedPort> <conf> <serverRef> <seconds>}: tries to join the cluster at the seed
 * and, every half second, sends the server a request for {@code affine([777, 0, 0])} with the callback
 * secret of its config; prints {@code UP} should it ever be a member, {@code GOT <reply>} for any answer,
 * then {@code DONE} after {@code seconds} and exits 0.
 */
final class SecureNodeMain {
  private SecureNodeMain() {}

  public static void main(String[] args) throws Exception {
    String mode = args[0];
    String node = args[1];
    int seedPort = Integer.parseInt(args[2]);
    Config config = ConfigFactory.parseFile(Path.of(args[3]).toFile()).withFallback(TestNodes.config(seedPort, 0, "callbacks"));
    ActorSystem<Void> system = XlaCluster.start(config);
    if (mode.equals("serve")) {
      ActorRef<?> server = ClusterCallbacks.create(system).serve(TestNodes.affine(node));
      System.out.println("SERVER " + ActorRefResolver.get(system).toSerializationFormat(server));
      TestNodes.announceReadyAndLiveWhileTheParentDoes(system);
      return;
    }
    ActorRef<RemoteCallbackServer.Request> server = ActorRefResolver.get(system).resolveActorRef(args[4]);
    long deadline = System.nanoTime() + Long.parseLong(args[5]) * 1_000_000_000L;
    ActorRef<RemoteCallbackServer.Reply> replies = system.systemActorOf(Behaviors.receiveMessage(reply -> {
      System.out.println("GOT " + reply);
      System.out.flush();
      return Behaviors.same();
    }), "intruder-replies", org.apache.pekko.actor.typed.Props.empty());
    CallbackSecret secret = ClusterSecuritySettings.fromConfig(config).callbackSecret();
    boolean wasUp = false;
    for (long callId = 1; System.nanoTime() < deadline; callId++) {
      server.tell(new RemoteCallbackServer.Request(
          callId, "affine-remote", List.of(HostTensor.ofFloats(new float[] {777f, 0f, 0f}, 3)), replies, secret));
      if (!wasUp && Cluster.get(system).selfMember().status() == MemberStatus.up()) {
        wasUp = true;
        System.out.println("UP");
      }
      Thread.sleep(500);
    }
    System.out.println("DONE");
    System.out.flush();
    System.exit(0);
  }
}
