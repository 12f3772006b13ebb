package dev.xlaactors.nativebridge.presets;

import org.bytedeco.javacpp.annotation.Platform;
import org.bytedeco.javacpp.annotation.Properties;
import org.bytedeco.javacpp.tools.Info;
import org.bytedeco.javacpp.tools.InfoMap;
import org.bytedeco.javacpp.tools.InfoMapper;

/**
 * The JavaCPP preset of the PJRT C API ({@code pjrt_c_api.h}, from the fetched plugin wheel) and of the
 * bridge's own C functions ({@code xla_actors_bridge.h}). JavaCPP's Maven plugin parses both at build time
 * into {@code dev.xlaactors.nativebridge.pjrt} (one class per struct and function-pointer type) and
 * {@code dev.xlaactors.nativebridge.pjrt.global.Pjrt} (functions, enums, {@code *_STRUCT_SIZE}
 * constants), then compiles their JNI code together with the bridge's C++ into one library. Nothing
 * generated is committed. Only {@code dev.xlaactors.runtime} uses the generated classes.
 */
@Properties(
    target = "dev.xlaactors.nativebridge.pjrt",
    global = "dev.xlaactors.nativebridge.pjrt.global.Pjrt",
    value =
        @Platform(
            value = "linux-x86_64",
            compiler = "cpp17",
            include = {"xla/pjrt/c/pjrt_c_api.h", "xla_actors_bridge.h"},
            link = "dl"))
public class PjrtPresets implements InfoMapper {
  @Override
  public void map(InfoMap infoMap) {
    // The sampler passes Java arrays of logits: pinned for the call (GetPrimitiveArrayCritical), not copied in
    // and out. The function only reads and writes them, and returns at once.
    infoMap.put(
        new Info("XlaActors_ExpSum")
            .javaText(
                "public static native @CriticalRegion double XlaActors_ExpSum(@Const float[] x, @Cast(\"int64_t\") long n,"
                    + " float shift, double[] terms);"));
    // The generated accessors of these two const-qualified pointer-to-pointer-to-pointer members do not
    // compile as JavaCPP writes them; spell out a getter and a setter with explicit casts.
    infoMap.put(
        new Info("PJRT_LoadedExecutable_Execute_Args::argument_lists")
            .javaText(
                "public native @Cast(\"PJRT_Buffer*const*const*\") PointerPointer argument_lists();\n"
                    + "public native PJRT_LoadedExecutable_Execute_Args argument_lists("
                    + "@Cast(\"PJRT_Buffer*const*const*\") PointerPointer setter);"));
    infoMap.put(
        new Info("PJRT_LoadedExecutable_Execute_Args::output_lists")
            .javaText(
                "public native @Cast(\"PJRT_Buffer**const*\") PointerPointer output_lists();\n"
                    + "public native PJRT_LoadedExecutable_Execute_Args output_lists("
                    + "@Cast(\"PJRT_Buffer**const*\") PointerPointer setter);"));
  }
}
