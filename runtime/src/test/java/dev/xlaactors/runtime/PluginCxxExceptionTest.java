package dev.xlaactors.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.xlaactors.error.CompileException;
import dev.xlaactors.error.ErrorCode;
import dev.xlaactors.error.InvalidArgumentException;
import dev.xlaactors.error.XlaException;
import org.junit.jupiter.api.Test;

/**
 * A C++ exception thrown inside the plugin reaches Java as a bare {@link RuntimeException} from JavaCPP,
 * carrying the exception's {@code what()} (how "Bad StatusOr access" and "Unexpected index" reached users).
 * Every PJRT call goes through {@link PjrtApi#check(java.util.function.Supplier, PjrtApi.Failure, String)},
 * which turns it into an {@link XlaException} of the call's kind naming the call.
 */
class PluginCxxExceptionTest {
  private final PjrtApi api = Plugin.load(RuntimeSettings.load()).api();

  @Test
  void aCxxExceptionFromAPjrtCallBecomesAnXlaExceptionNamingTheCall() {
    RuntimeException thrownByJavaCpp = new RuntimeException("Bad StatusOr access: INVALID_ARGUMENT: bad program");
    CompileException e = assertThrows(CompileException.class,
        () -> api.check(() -> { throw thrownByJavaCpp; }, PjrtApi.Failure.COMPILE, "PJRT_Client_Compile"));
    assertEquals(ErrorCode.INTERNAL, e.code());
    assertTrue(e.getMessage().startsWith("PJRT_Client_Compile threw inside the plugin (a C++ exception, not a PJRT error): "
        + "Bad StatusOr access: INVALID_ARGUMENT: bad program"), e.getMessage());
  }

  @Test
  void anXlaExceptionFromTheCallPassesAsItIs() {
    InvalidArgumentException ours = new InvalidArgumentException("refused before the plugin");
    assertSame(ours, assertThrows(InvalidArgumentException.class,
        () -> api.check(() -> { throw ours; }, PjrtApi.Failure.GENERIC, "PJRT_Buffer_Device")));
  }

  @Test
  void aCallThatReturnsNoErrorPasses() {
    api.check(() -> null, PjrtApi.Failure.GENERIC, "PJRT_Buffer_Device");
  }
}
