package dev.xlaactors.actors.jobs;

import dev.xlaactors.runtime.HostTensor;
import java.util.List;

/** Produces the inputs of one item of a batch job from its index (0 to count-1). Runs on a blocking dispatcher. */
@FunctionalInterface
public interface ItemSource {
  List<HostTensor> input(long index) throws Exception;
}
