package dev.xlaactors.actors;

import java.util.List;
import java.util.stream.Collectors;

/** StableHLO text for the callback tests. */
final class Programs {
  private Programs() {}

  /** A host-callback custom call: {@code %result = call(operands)} with the given types. */
  static String call(String result, String callback, List<String> operands, List<String> inTypes, List<String> outTypes) {
    String outs = outTypes.size() == 1 ? outTypes.get(0) : "(" + String.join(", ", outTypes) + ")";
    return "%s = stablehlo.custom_call @xla_actors.host_callback(%s) {api_version = 4 : i32, backend_config = {callback = \"%s\"}, has_side_effect = true} : (%s) -> %s"
        .formatted(result, String.join(", ", operands), callback, String.join(", ", inTypes), outs);
  }

  /** {@code main(x: type) -> type} whose body is: {@code y = f(x)} through callback {@code name}, then {@code y * 3}. */
  static String oneCall(String name, String type) {
    return """
        func.func @main(%x: TYPE) -> TYPE {
          CALL
          %three = stablehlo.constant dense<3.0> : TYPE
          %z = stablehlo.multiply %y, %three : TYPE
          return %z : TYPE
        }
        """
        .replace("CALL", call("%y", name, List.of("%x"), List.of(type), List.of(type)))
        .replace("TYPE", type);
  }

  static String lines(String... lines) {
    return java.util.Arrays.stream(lines).collect(Collectors.joining("\n"));
  }
}
