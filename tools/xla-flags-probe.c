// Measures which XLA_FLAGS values a PJRT plugin accepts. XLA parses XLA_FLAGS at the first client creation and
// ends the process (exit 1) on an unknown flag or a value it cannot parse, so each value is tried in a child forked
// after the plugin is loaded: it sets XLA_FLAGS and creates a client. Made the table
// runtime/src/main/resources/dev/xlaactors/runtime/xla-cpu-pjrt-0.0.1.flags (see docs/reliability.md, section 16).
//
//   cc -O1 -I ~/.cache/xla-actors/include tools/xla-flags-probe.c -o /tmp/xla-flags-probe -ldl
//   printf '%s\n' --xla_nonexistent=1 --xla_cpu_enable_fast_math=true | /tmp/xla-flags-probe PLUGIN.so
//
// One XLA_FLAGS value per input line; prints "OK<tab>value", or "DIE<tab>exit<tab>why<tab>value" with why
// UNKNOWN (unknown flag), BADVALUE (flag parsing failed), NOFILE (flags file not found) or OTHER.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "xla/pjrt/c/pjrt_c_api.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s PLUGIN.so < values\n", argv[0]);
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "%s\n", dlerror());
    return 2;
  }
  const PJRT_Api* (*get_api)(void) = (const PJRT_Api* (*)(void))dlsym(lib, "GetPjrtApi");
  if (!get_api) {
    fprintf(stderr, "%s has no GetPjrtApi\n", argv[1]);
    return 2;
  }
  const PJRT_Api* api = get_api();
  PJRT_Plugin_Initialize_Args init;
  memset(&init, 0, sizeof init);
  init.struct_size = PJRT_Plugin_Initialize_Args_STRUCT_SIZE;
  if (api->PJRT_Plugin_Initialize) api->PJRT_Plugin_Initialize(&init);
  static char line[65536];
  while (fgets(line, sizeof line, stdin)) {
    line[strcspn(line, "\n")] = 0;
    int err[2];
    if (pipe(err) != 0) return 2;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      close(err[0]);
      dup2(err[1], 2);
      setenv("XLA_FLAGS", line, 1);
      PJRT_Client_Create_Args create;
      memset(&create, 0, sizeof create);
      create.struct_size = PJRT_Client_Create_Args_STRUCT_SIZE;
      _exit(api->PJRT_Client_Create(&create) ? 7 : 0);
    }
    close(err[1]);
    static char text[65536];
    size_t n = 0;
    ssize_t r;
    while ((r = read(err[0], text + n, sizeof text - 1 - n)) > 0) n += (size_t)r;
    text[n] = 0;
    close(err[0]);
    int status;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      printf("OK\t%s\n", line);
    } else {
      const char* why = strstr(text, "Unknown flag")          ? "UNKNOWN"
                        : strstr(text, "Flag parsing failed") ? "BADVALUE"
                        : strstr(text, "Could not open file") ? "NOFILE"
                                                              : "OTHER";
      printf("DIE\t%d\t%s\t%s\n", WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), why, line);
    }
  }
  return 0;
}
