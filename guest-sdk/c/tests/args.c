// Native tests of toolcage.h's JSON argument readers, result builders and
// UTF-8 handling, run by guest-sdk/c/tests/run under AddressSanitizer and
// UndefinedBehaviorSanitizer (the header's host calls are stubbed below).
#include <assert.h>
#include <stdio.h>

#include "toolcage.h"

// The bindings' imports, which only the toolcage host provides.
void __wasm_import_toolcage_tool_host_log(int32_t level, uint8_t *ptr, size_t len) {}
void __wasm_import_toolcage_tool_host_progress(double a, int32_t b, double c, int32_t d, uint8_t *e, size_t f) {}
void __wasm_import_toolcage_tool_host_elicit(uint8_t *a, size_t b, uint8_t *c, size_t d, uint8_t *e) {}
void __wasm_import_toolcage_tool_host_sample(uint8_t *a, size_t b, int32_t c, uint8_t *d, size_t e,
                                             int32_t f, int32_t g, double h, uint8_t *i) {}
// Defined by tool_component_component_type.o, a wasm object.
void __component_type_object_force_link_tool_component(void) {}

static int failures, checks;
#define CHECK(cond)                                                        \
    do {                                                                   \
        checks++;                                                          \
        if (!(cond)) {                                                     \
            failures++;                                                    \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                  \
    } while (0)

static bool string_is(const char *args, const char *key, const char *want) {
    char *got;
    if (!toolcage_arg_string(args, key, &got)) return false;
    bool same = strcmp(got, want) == 0;
    if (!same) fprintf(stderr, "  %s: got \"%s\", want \"%s\"\n", key, got, want);
    free(got);
    return same;
}

static bool int_is(const char *args, const char *key, int64_t want) {
    int64_t got = 12345;
    return toolcage_arg_int(args, key, &got) && got == want;
}

static bool no_int(const char *args, const char *key) {
    int64_t got = 777;
    return !toolcage_arg_int(args, key, &got) && got == 777;
}

static void dummy(const char *args, toolcage_result *result) {
    toolcage_text(result, "one");
    toolcage_structured(result, "{\"a\":1}");
}

TOOLCAGE_TOOLS({.name = "dummy", .description = "d", .run = dummy});

int main(void) {
    // Strings, escapes, last duplicate wins, nested values skipped.
    const char *args = " {\"text\" : \"a\\\"b\\\\c\\/d\\n\\u00e9\\ud83d\\ude00\", \"n\":[1,{\"text\":\"inner\"}],"
                       " \"text2\":\"x\", \"dup\":\"first\", \"dup\":\"second\", \"k\\u0065y\":\"escaped key\"} ";
    CHECK(string_is(args, "text", "a\"b\\c/d\n\xc3\xa9\xf0\x9f\x98\x80"));
    CHECK(string_is(args, "dup", "second"));
    CHECK(string_is(args, "key", "escaped key"));
    CHECK(string_is(args, "text2", "x"));
    CHECK(!string_is(args, "inner", "x"));
    CHECK(!string_is(args, "missing", ""));
    char *raw;
    CHECK(toolcage_arg_json(args, "n", &raw) && strcmp(raw, "[1,{\"text\":\"inner\"}]") == 0);
    free(raw);
    // A lone surrogate becomes U+FFFD; \u0000 is kept, with the length.
    CHECK(string_is("{\"s\":\"\\ud800x\"}", "s", "\xef\xbf\xbdx"));
    char *z;
    size_t zlen;
    CHECK(toolcage_arg_stringn("{\"s\":\"a\\u0000b\"}", "s", &z, &zlen) && zlen == 3 && z[1] == '\0' && z[2] == 'b');
    free(z);

    // Integers, including the JSON Schema sense of `integer`.
    const char *nums = "{\"a\":42,\"b\":-7,\"c\":42.0,\"d\":4.2e1,\"e\":4.5,\"f\":\"5\",\"g\":9223372036854775807,"
                       "\"h\":-9223372036854775808,\"i\":9223372036854775808,\"j\":1e300,\"k\":0,\"l\":true,\"m\":-0}";
    CHECK(int_is(nums, "a", 42));
    CHECK(int_is(nums, "b", -7));
    CHECK(int_is(nums, "c", 42));
    CHECK(int_is(nums, "d", 42));
    CHECK(no_int(nums, "e"));
    CHECK(no_int(nums, "f"));
    CHECK(int_is(nums, "g", INT64_MAX));
    CHECK(int_is(nums, "h", INT64_MIN));
    CHECK(no_int(nums, "i"));
    CHECK(no_int(nums, "j"));
    CHECK(int_is(nums, "k", 0));
    CHECK(no_int(nums, "l"));
    CHECK(int_is(nums, "m", 0));
    double d = 0;
    CHECK(toolcage_arg_number(nums, "e", &d) && d == 4.5);
    CHECK(!toolcage_arg_number(nums, "f", &d));

    // Booleans.
    bool flag = false;
    CHECK(toolcage_arg_bool("{\"t\":true,\"f\":false,\"n\":null}", "t", &flag) && flag);
    CHECK(toolcage_arg_bool("{\"t\":true,\"f\":false,\"n\":null}", "f", &flag) && !flag);
    flag = true;
    CHECK(!toolcage_arg_bool("{\"t\":true,\"f\":false,\"n\":null}", "n", &flag) && flag);

    // Malformed input finds nothing, wherever the fault is.
    const char *bad[] = {
        "", "   ", "[]", "\"text\"", "{", "{\"text\"", "{\"text\":", "{\"text\":\"a\"",
        "{\"text\":\"a\",}", "{\"text\":\"a\"} x", "{\"text\":\"a\" \"b\":1}", "{text:\"a\"}",
        "{\"text\":\"a\\x\"}", "{\"text\":\"a\\u12\"}", "{\"text\":\"a\nb\"}", "{\"text\":\"a\",\"n\":01}",
        "{\"text\":\"a\",\"n\":1.}", "{\"text\":\"a\",\"n\":-}", "{\"text\":\"a\",\"n\":tru}",
        "{\"text\":\"a\",\"n\":[1,2}", "{\"text\":\"a\",\"n\":{\"x\"}}", "{\"text\":\"a\",\"n\":+1}",
        "{\"text\":\"a\",\"n\":[1,]}", "{\"text\":\"a\\", "{\"text\":\"a\\u",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *s = NULL;
        bool found = toolcage_arg_string(bad[i], "text", &s);
        if (found) fprintf(stderr, "  malformed input accepted: %s\n", bad[i]);
        CHECK(!found);
        free(s);
    }
    CHECK(!string_is(NULL, "text", ""));

    // Deep nesting: up to the limit is fine, past it is malformed.
    char deep[1024];
    for (int depth = 120; depth <= 140; depth += 20) {
        size_t o = 0;
        o += (size_t)snprintf(deep + o, sizeof deep - o, "{\"text\":\"ok\",\"n\":");
        for (int i = 1; i < depth; i++) deep[o++] = '[';
        for (int i = 1; i < depth; i++) deep[o++] = ']';
        deep[o++] = '}';
        deep[o] = '\0';
        CHECK(string_is(deep, "text", "ok") == (depth <= TOOLCAGE__JSON_MAX_DEPTH));
    }

    // Mutations of a valid object never read out of bounds (ASan checks).
    const char *seed = "{\"text\":\"h\\u00e9llo \\\"w\\\"\",\"unique\":true,\"n\":[1,-2.5e3,{\"x\":null}],\"k\":42}";
    size_t seed_len = strlen(seed);
    static const char alphabet[] = "{}[]\",:\\u0123456789.eE-+tfnrl \x01\xff";
    uint32_t rng = 12345;
    for (int round = 0; round < 200000; round++) {
        size_t len = seed_len;
        char *buf = malloc(len + 1);
        memcpy(buf, seed, len + 1);
        for (int m = 0; m < 1 + round % 4; m++) {
            rng = rng * 1103515245u + 12345u;
            size_t at = (rng >> 8) % len;
            rng = rng * 1103515245u + 12345u;
            switch ((rng >> 8) % 3) {
            case 0: buf[at] = alphabet[(rng >> 16) % (sizeof alphabet - 1)]; break;
            case 1: len = at; buf[len] = '\0'; break;
            default: memmove(buf + at, buf + at + 1, len - at); len--; break;
            }
            if (len == 0) break;
        }
        // Exactly sized, so that a read past the NUL is caught.
        char *exact = malloc(len + 1);
        memcpy(exact, buf, len + 1);
        char *s;
        if (toolcage_arg_string(exact, "text", &s)) free(s);
        int64_t i64;
        toolcage_arg_int(exact, "k", &i64);
        bool b;
        toolcage_arg_bool(exact, "unique", &b);
        char *j;
        if (toolcage_arg_json(exact, "n", &j)) free(j);
        free(exact);
        free(buf);
    }

    // UTF-8: invalid sequences handed to the host become U+FFFD.
    tool_component_string_t out;
    toolcage__string(&out, "ok \xff \xc3\xa9 \xe2\x82 \xed\xa0\x80 \xf0\x9f\x98\x80");
    const char *want = "ok \xef\xbf\xbd \xc3\xa9 \xef\xbf\xbd\xef\xbf\xbd \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd \xf0\x9f\x98\x80";
    CHECK(out.len == strlen(want) && memcmp(out.ptr, want, out.len) == 0);
    tool_component_string_free(&out);
    toolcage__string(&out, "");
    CHECK(out.len == 0 && out.ptr == NULL);

    // JSON quoting.
    char *q = toolcage_json_quote("a\"b\\c\n\x01");
    CHECK(strcmp(q, "\"a\\\"b\\\\c\\n\\u0001\"") == 0);
    free(q);

    // Results: structured adds a text item; an error replaces everything.
    toolcage_result r;
    memset(&r, 0, sizeof r);
    toolcage_text(&r, "hello");
    toolcage_structuredf(&r, "{\"n\":%d}", 3);
    CHECK(r.content.len == 2 && r.structured.is_some && !r.is_error);
    CHECK(r.structured.val.len == 7 && memcmp(r.structured.val.ptr, "{\"n\":3}", 7) == 0);
    CHECK(r.content.ptr[1].tag == TOOLCAGE_TOOL_TYPES_CONTENT_TEXT &&
          memcmp(r.content.ptr[1].val.text.ptr, "{\"n\":3}", 7) == 0);
    toolcage_error(&r, "bad %s", "thing");
    CHECK(r.is_error && !r.structured.is_some && r.content.len == 1 &&
          r.content.ptr[0].val.text.len == 9 && memcmp(r.content.ptr[0].val.text.ptr, "bad thing", 9) == 0);
    toolcage_tool_types_call_result_free(&r);

    // Dispatch through the exports TOOLCAGE_TOOLS defined (arguments are
    // owned by the callee, as the bindings hand them over).
    tool_component_string_t name, arguments;
    exports_toolcage_tool_tool_call_result_t ret;
    tool_component_string_dup(&name, "dummy");
    tool_component_string_dup(&arguments, "{}");
    exports_toolcage_tool_tool_call(&name, &arguments, &ret);
    CHECK(!ret.is_error && ret.content.len == 2 && ret.structured.is_some);
    exports_toolcage_tool_tool_call_result_free(&ret);
    tool_component_string_dup(&name, "nope");
    tool_component_string_dup(&arguments, "{}");
    exports_toolcage_tool_tool_call(&name, &arguments, &ret);
    CHECK(ret.is_error && ret.content.len == 1 &&
          memcmp(ret.content.ptr[0].val.text.ptr, "this component has no tool `nope`", 33) == 0);
    exports_toolcage_tool_tool_call_result_free(&ret);
    exports_toolcage_tool_tool_list_descriptor_t list;
    exports_toolcage_tool_tool_describe(&list);
    CHECK(list.len == 1 && list.ptr[0].name.len == 5 && !list.ptr[0].title.is_some &&
          list.ptr[0].input_schema.len == strlen("{\"type\":\"object\"}"));
    exports_toolcage_tool_tool_list_descriptor_free(&list);

    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures != 0;
}
