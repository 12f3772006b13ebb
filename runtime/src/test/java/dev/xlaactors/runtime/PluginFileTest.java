package dev.xlaactors.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.xlaactors.error.PluginException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.security.MessageDigest;
import java.time.Instant;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Bad plugin files are refused before dlopen, in-process and with a message naming the file and how to
 * re-fetch it, instead of crashing the JVM inside the dynamic loader: a truncated copy of the real plugin, an
 * empty file, a text file, an ELF for another machine, a corrupt program header, a fetched plugin whose size
 * or sha256 is not the pinned one, and a plugin whose API table lacks a function the runtime calls.
 */
class PluginFileTest {
  @TempDir Path dir;

  private static Path realPlugin() {
    Path plugin = RuntimeSettings.load().pluginPath();
    assumeTrue(Files.isRegularFile(plugin), "no plugin at " + plugin);
    return plugin;
  }

  private static Path truncatedCopy(Path target, long bytes) throws IOException {
    try (InputStream in = Files.newInputStream(realPlugin()); OutputStream out = Files.newOutputStream(target)) {
      out.write(in.readNBytes((int) bytes));
    }
    return target;
  }

  private static PluginException refused(Path file) {
    PluginException e = assertThrows(PluginException.class, () -> Plugin.load(file));
    assertTrue(e.getMessage().contains(file.toString()), e.getMessage());
    assertTrue(e.getMessage().contains(RuntimeSettings.FETCH_COMMAND), e.getMessage());
    return e;
  }

  @Test
  void aTruncatedCopyOfTheRealPluginIsRefusedNotLoaded() throws Exception {
    Path file = truncatedCopy(dir.resolve("truncated.so"), 8 << 20);
    PluginException e = refused(file);
    assertTrue(e.getMessage().contains("is cut short: its loadable segment"), e.getMessage());
    assertTrue(e.getMessage().contains("past its end (" + (8 << 20) + " bytes)"), e.getMessage());
  }

  @Test
  void anEmptyFileAndATextFileAreRefused() throws Exception {
    Path empty = Files.createFile(dir.resolve("empty.so"));
    assertTrue(refused(empty).getMessage().contains(empty + " is empty (0 bytes)"));
    Path text = Files.writeString(dir.resolve("text.so"), "this is not a shared library\n");
    PluginException e = refused(text);
    assertTrue(e.getMessage().contains(text + " is not an ELF shared library: it starts with 74 68 69 73"), e.getMessage());
  }

  @Test
  void anElfForAnotherMachineIsRefusedNamingBothMachines() throws Exception {
    assumeTrue(PluginFile.hostMachine() == PluginFile.EM_X86_64, "the crafted header says aarch64, so the host must not be");
    byte[] header = elf(PluginFile.EM_AARCH64, 4096, 0, 4096);
    Path file = Files.write(dir.resolve("arm.so"), header);
    PluginException e = refused(file);
    assertTrue(e.getMessage().contains(file + " is built for machine 183 (aarch64), but this JVM runs on 62 (x86_64)"),
        e.getMessage());
    Path exec = Files.write(dir.resolve("exec.so"), withType(elf(PluginFile.EM_X86_64, 4096, 0, 4096), 2));
    assertTrue(refused(exec).getMessage().contains(exec + " is an executable (ELF type 2), not a shared library"));
    byte[] elf32 = elf(PluginFile.EM_X86_64, 4096, 0, 4096);
    elf32[4] = 1;
    Path small = Files.write(dir.resolve("elf32.so"), elf32);
    assertTrue(refused(small).getMessage().contains(small + " is a 32-bit ELF file"));
    byte[] bigEndian = elf(PluginFile.EM_X86_64, 4096, 0, 4096);
    bigEndian[5] = 2;
    Path be = Files.write(dir.resolve("be.so"), bigEndian);
    assertTrue(refused(be).getMessage().contains(be + " is a big-endian ELF file"));
  }

  @Test
  void aCorruptProgramHeaderIsRefused() throws Exception {
    // A well-formed header passes the checks (it would then fail in dlopen with an ordinary error).
    byte[] good = elf(PluginFile.hostMachine(), 4096, 0, 4096);
    PluginFile.check(Files.write(dir.resolve("good.so"), good));
    Path pastEnd = Files.write(dir.resolve("past-end.so"), elf(PluginFile.hostMachine(), 4096, 1L << 40, 4096));
    assertTrue(refused(pastEnd).getMessage().contains("is cut short: its loadable segment 0 lies at bytes 1099511627776..1099511631872"));
    Path overflow = Files.write(dir.resolve("overflow.so"), elf(PluginFile.hostMachine(), 4096, Long.MAX_VALUE, 4096));
    assertTrue(refused(overflow).getMessage().contains("is cut short: its loadable segment 0"));
    byte[] table = elf(PluginFile.hostMachine(), 4096, 0, 4096);
    ByteBuffer.wrap(table).order(ByteOrder.LITTLE_ENDIAN).putLong(32, 1L << 50); // e_phoff
    Path badTable = Files.write(dir.resolve("phoff.so"), table);
    assertTrue(refused(badTable).getMessage().contains("its program header table (bytes 1125899906842624"));
    byte[] entry = elf(PluginFile.hostMachine(), 4096, 0, 4096);
    ByteBuffer.wrap(entry).order(ByteOrder.LITTLE_ENDIAN).putShort(54, (short) 7); // e_phentsize
    Path badEntry = Files.write(dir.resolve("phentsize.so"), entry);
    assertTrue(refused(badEntry).getMessage().contains("program header entries of 7 bytes, expected 56"));
  }

  @Test
  void aFetchedPluginIsCheckedAgainstItsPinnedSizeAndSha256() throws Exception {
    byte[] good = elf(PluginFile.hostMachine(), 4096, 0, 4096);
    Path file = Files.write(dir.resolve("pinned.so"), good);
    Path pin = dir.resolve("pinned.so.pin");
    Files.writeString(pin, "sha256=" + sha256(good) + "\nsize=" + good.length + "\n");
    Files.setLastModifiedTime(file, FileTime.from(Instant.now().minusSeconds(60)));
    PluginFile.check(file); // as pinned

    Files.write(file, java.util.Arrays.copyOf(good, 1000));
    PluginException cut = refused(file);
    assertTrue(cut.getMessage().contains(file + " is 1000 bytes, but the fetched plugin is " + good.length + " bytes"), cut.getMessage());

    byte[] changed = good.clone();
    changed[4000] = 1; // same size, other content, written after the pin
    Files.write(file, changed);
    PluginException hash = refused(file);
    assertTrue(hash.getMessage().contains(file + " has sha256 " + sha256(changed) + ", but the fetched plugin's is " + sha256(good)),
        hash.getMessage());
  }

  @Test
  void thePinBesideTheFetchedPluginMatchesTheRealPlugin() throws Exception {
    Path plugin = realPlugin();
    Path pin = plugin.resolveSibling(plugin.getFileName() + ".pin");
    assumeTrue(Files.exists(pin) || plugin.equals(RuntimeSettings.defaultPluginPath()), "not the fetched plugin");
    assertTrue(Files.exists(pin), "fetch-third-party.sh writes " + pin);
    Map<String, String> pinned = PluginFile.readPin(pin);
    assertEquals(Long.toString(Files.size(plugin)), pinned.get("size"));
  }

  @Test
  void aPluginWhoseApiTableLacksAFunctionWeCallIsRefusedAtLoad() throws Exception {
    Path allNull = fakePlugin("all-null", "-DALL_NULL");
    PluginException none = refused(allNull);
    assertTrue(none.getMessage().contains("has no PJRT_Error_Destroy"), none.getMessage());
    Path noContext = fakePlugin("no-context", "-DNULL_FN=PJRT_ExecuteContext_Create");
    PluginException e = refused(noContext);
    assertTrue(e.getMessage().contains("has no PJRT_ExecuteContext_Create, which xla-actors needs"), e.getMessage());
  }

  @Test
  void aTruncatedPluginNoLongerCrashesAChildJvm() throws Exception {
    Path file = truncatedCopy(dir.resolve("child-truncated.so"), 8 << 20);
    ChildJvm.Result r = ChildJvm.run(PluginTest.LoadConfiguredPlugin.class, List.of(), Map.of(RuntimeSettings.PLUGIN_ENV, file.toString()));
    assertEquals(3, r.exitCode(), r.output());
    assertTrue(r.output().contains(file + " is cut short"), r.output());
  }

  // ---- helpers -------------------------------------------------------------------------------

  /** A fake PJRT plugin compiled from C: every API entry a stub, except those the flags null out. */
  private Path fakePlugin(String name, String flag) throws Exception {
    Path include = RuntimeSettings.defaultPluginPath().resolveSibling("include");
    assumeTrue(Files.isRegularFile(include.resolve("xla/pjrt/c/pjrt_c_api.h")), "no pjrt_c_api.h under " + include);
    Path source = Files.writeString(dir.resolve(name + ".c"), """
        #include <stddef.h>
        #include "xla/pjrt/c/pjrt_c_api.h"
        static void* stub(void* args) { (void) args; return NULL; }
        static PJRT_Api api;
        const PJRT_Api* GetPjrtApi(void) {
        #ifndef ALL_NULL
          void** slots = (void**) &api;
          for (size_t o = offsetof(PJRT_Api, PJRT_Error_Destroy); o + sizeof(void*) <= sizeof(PJRT_Api); o += sizeof(void*))
            slots[o / sizeof(void*)] = (void*) stub;
        #endif
          api.struct_size = PJRT_Api_STRUCT_SIZE;
          api.pjrt_api_version.struct_size = PJRT_Api_Version_STRUCT_SIZE;
          api.pjrt_api_version.major_version = PJRT_API_MAJOR;
          api.pjrt_api_version.minor_version = PJRT_API_MINOR;
        #ifdef NULL_FN
          api.NULL_FN = NULL;
        #endif
          return &api;
        }
        """);
    Path so = dir.resolve(name + ".so");
    Process cc;
    try {
      cc = new ProcessBuilder("cc", "-shared", "-fPIC", flag, "-I" + include, "-o", so.toString(), source.toString())
          .redirectErrorStream(true).start();
    } catch (IOException noCompiler) {
      assumeTrue(false, "no C compiler: " + noCompiler.getMessage());
      throw noCompiler;
    }
    String output = new String(cc.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertTrue(cc.waitFor(60, TimeUnit.SECONDS) && cc.exitValue() == 0, output);
    return so;
  }

  /** A minimal 64-bit little-endian ELF shared object: a header and one PT_LOAD segment, {@code size} bytes long. */
  static byte[] elf(int machine, int size, long loadOffset, long loadSize) {
    ByteBuffer b = ByteBuffer.allocate(size).order(ByteOrder.LITTLE_ENDIAN);
    b.put(new byte[] {0x7f, 'E', 'L', 'F', 2, 1, 1, 0});
    b.putShort(16, (short) 3); // ET_DYN
    b.putShort(18, (short) machine);
    b.putInt(20, 1);
    b.putLong(32, 64); // e_phoff
    b.putShort(52, (short) 64); // e_ehsize
    b.putShort(54, (short) 56); // e_phentsize
    b.putShort(56, (short) 1); // e_phnum
    b.putInt(64, 1); // PT_LOAD
    b.putLong(64 + 8, loadOffset);
    b.putLong(64 + 32, loadSize); // p_filesz
    b.putLong(64 + 40, loadSize); // p_memsz
    return b.array();
  }

  private static byte[] withType(byte[] elf, int type) {
    ByteBuffer.wrap(elf).order(ByteOrder.LITTLE_ENDIAN).putShort(16, (short) type);
    return elf;
  }

  private static String sha256(byte[] bytes) throws Exception {
    return HexFormat.of().formatHex(MessageDigest.getInstance("SHA-256").digest(bytes));
  }
}
