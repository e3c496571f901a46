// A tool whose component reads its environment while it is instantiated
// (a constructor: wasi-libc's reactor start-up runs it), for the test that
// such a component never gets an instance made ahead of its call: the
// value the constructor saw must be the call's own grant, every call.
#include <stdlib.h>

#include "toolcage.h"

static const char *seen_at_start;

__attribute__((constructor)) static void remember(void) {
    seen_at_start = getenv("GREETING");
}

static void greeting(const char *args, toolcage_result *result) {
    (void)args;
    toolcage_textf(result, "%s", seen_at_start ? seen_at_start : "(unset)");
}

TOOLCAGE_TOOLS(
    {
        .name = "greeting_at_start",
        .description = "The GREETING variable as the component saw it when it was instantiated.",
        .read_only = true,
        .run = greeting,
    },
);
