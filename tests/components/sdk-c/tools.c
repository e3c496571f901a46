// The C SDK example: the same tools, with the same names and behaviour, as
// the Python and JavaScript SDK examples, `where` (what contract 0.2.0
// added: an icon, task support, a client need, the client's roots, a keyed
// question) included. Built by tests/components/build-sdk-c with
// guest-sdk/c/build.
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "toolcage.h"

// Lower-cases ASCII letters in place (words are compared case-insensitively).
static void lowercase(char *s) {
    for (; *s; s++) *s = (char)tolower((unsigned char)*s);
}

static int compare_strings(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void word_count(const char *args, toolcage_result *result) {
    char *text;
    bool unique = false;
    if (!toolcage_arg_string(args, "text", &text)) {
        toolcage_error(result, "`text` must be a string");
        return;
    }
    toolcage_arg_bool(args, "unique", &unique);

    size_t count = 0, cap = 16;
    char **words = malloc(cap * sizeof *words);
    if (!words) abort();
    for (char *word = strtok(text, " \t\n\r\f\v"); word; word = strtok(NULL, " \t\n\r\f\v")) {
        if (count == cap) {
            words = realloc(words, (cap *= 2) * sizeof *words);
            if (!words) abort();
        }
        words[count++] = word;
    }
    if (unique) {
        for (size_t i = 0; i < count; i++) lowercase(words[i]);
        qsort(words, count, sizeof *words, compare_strings);
        size_t distinct = 0;
        for (size_t i = 0; i < count; i++)
            if (i == 0 || strcmp(words[i], words[i - 1]) != 0) distinct++;
        toolcage_structuredf(result, "{\"words\":%zu,\"unique_words\":%zu}", count, distinct);
    } else {
        toolcage_structuredf(result, "{\"words\":%zu}", count);
    }
    free(words);
    free(text);
}

static void fail(const char *args, toolcage_result *result) {
    char *message;
    if (!toolcage_arg_string(args, "message", &message)) {
        toolcage_error(result, "`message` must be a string");
        return;
    }
    toolcage_error(result, "%s", message);
    free(message);
}

static void chatty(const char *args, toolcage_result *result) {
    int64_t steps;
    if (!toolcage_arg_int(args, "steps", &steps) || steps < 1 || steps > 10) {
        toolcage_error(result, "`steps` must be an integer from 1 to 10");
        return;
    }
    for (int64_t i = 1; i <= steps; i++) {
        char *message = toolcage_printf("step %lld", (long long)i);
        toolcage_log(TOOLCAGE_INFO, "%s", message);
        toolcage_progress((double)i, (double)steps, message);
        free(message);
    }
    toolcage_textf(result, "done after %lld steps", (long long)steps);
}

static void archive(const char *args, toolcage_result *result) {
    char *name, *error;
    if (!toolcage_arg_string(args, "name", &name)) {
        toolcage_error(result, "`name` must be a string");
        return;
    }
    char *question = toolcage_printf("Archive %s?", name);
    bool yes = toolcage_confirm(question, &error);
    free(question);
    if (error) {
        toolcage_error(result, "%s", error);
        free(error);
    } else if (yes) {
        toolcage_textf(result, "archived %s", name);
    } else {
        toolcage_error(result, "not archived: the user said no");
    }
    free(name);
}

static void spin(const char *args, toolcage_result *result) {
    volatile uint64_t counter = 0;
    for (;;) counter++;
}

static void hog(const char *args, toolcage_result *result) {
    int64_t mib;
    if (!toolcage_arg_int(args, "mib", &mib) || mib < 0) {
        toolcage_error(result, "`mib` must be a non-negative integer");
        return;
    }
    // One MiB at a time, each touched page by page so that the memory is
    // really in use, chained through their first bytes.
    void *chunks = NULL;
    for (int64_t i = 0; i < mib; i++) {
        char *chunk = malloc(1024 * 1024);
        // Past the memory limit malloc returns NULL: trap, so that the host
        // reports the limit (as Rust's allocation-failure abort does).
        if (!chunk) abort();
        for (size_t page = 0; page < 1024 * 1024; page += 4096) ((volatile char *)chunk)[page] = 1;
        *(void **)chunk = chunks;
        chunks = chunk;
    }
    while (chunks) {
        void *next = *(void **)chunks;
        free(chunks);
        chunks = next;
    }
    toolcage_textf(result, "allocated %lld MiB", (long long)mib);
}

static void where(const char *args, toolcage_result *result) {
    char *key = NULL, *error = NULL;
    toolcage_root *roots = NULL;
    size_t count = 0;
    if (toolcage_arg_string(args, "key", &key)) {
        toolcage_question question = {.key = key, .kind = TOOLCAGE_ASK_ROOTS};
        toolcage_reply reply;
        toolcage_ask(&question, 1, &reply);
        error = reply.error;
        roots = reply.roots;
        count = reply.root_count;
        free(key);
    } else {
        // On failure `error` says why.
        toolcage_roots(&roots, &count, &error);
    }
    if (error) {
        toolcage_error(result, "%s", error);
        free(error);
        return;
    }
    // One URI a line.
    size_t length = 1;
    for (size_t i = 0; i < count; i++) length += strlen(roots[i].uri) + 1;
    char *text = malloc(length);
    if (!text) abort();
    text[0] = '\0';
    for (size_t i = 0; i < count; i++) {
        if (i) strcat(text, "\n");
        strcat(text, roots[i].uri);
    }
    toolcage_text(result, count ? text : "no roots");
    free(text);
    toolcage_roots_free(roots, count);
}

TOOLCAGE_TOOLS(
    {
        .name = "word_count",
        .title = "Word count",
        .description = "Count the words in a text (split on whitespace); with `unique`, also "
                       "the distinct words, compared case-insensitively.",
        .input_schema = TOOLCAGE_JSON({
            "type": "object",
            "properties": {
                "text": {"type": "string", "minLength": 1},
                "unique": {"type": "boolean"}
            },
            "required": ["text"]
        }),
        .output_schema = TOOLCAGE_JSON({
            "type": "object",
            "properties": {
                "words": {"type": "integer"},
                "unique_words": {"type": "integer"}
            },
            "required": ["words"]
        }),
        .read_only = true,
        .idempotent = true,
        .run = word_count,
    },
    {
        .name = "fail",
        .description = "Always fails, with the given message as the error.",
        .input_schema = TOOLCAGE_JSON({
            "type": "object",
            "properties": {"message": {"type": "string"}},
            "required": ["message"]
        }),
        .run = fail,
    },
    {
        .name = "chatty",
        .description = "Logs and reports progress for each of `steps` steps.",
        .input_schema = TOOLCAGE_JSON({
            "type": "object",
            "properties": {"steps": {"type": "integer", "minimum": 1, "maximum": 10}},
            "required": ["steps"]
        }),
        .run = chatty,
    },
    {
        .name = "archive",
        .description = "Archives an item after asking the user to confirm.",
        .input_schema = TOOLCAGE_JSON({
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"]
        }),
        .run = archive,
    },
    {
        .name = "spin",
        .description = "Loops forever (for testing CPU and time limits).",
        .run = spin,
    },
    {
        .name = "hog",
        .description = "Allocates and touches `mib` MiB of memory (for testing the memory limit).",
        .input_schema = TOOLCAGE_JSON({
            "type": "object",
            "properties": {"mib": {"type": "integer"}},
            "required": ["mib"]
        }),
        .run = hog,
    },
    {
        .name = "where",
        .description = "List the folders the user works in (the client's roots), one URI a line.",
        .input_schema = TOOLCAGE_JSON({
            "type": "object",
            "properties": {
                "key": {"type": "string", "description": "Ask for them as a question under this key instead."}
            }
        }),
        .run = where,
        .icons = TOOLCAGE_ICONS({.src = "data:image/svg+xml;base64,PHN2Zy8+", .mime_type = "image/svg+xml", .sizes = "any"}),
        .task_support = TOOLCAGE_TASK_OPTIONAL,
        .needs = TOOLCAGE_NEEDS_ROOTS,
    },
);
