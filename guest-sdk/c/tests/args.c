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
static int begun;
void __wasm_import_toolcage_tool_host_begin_task(void) { begun++; }

// The host's side of `roots` and `ask`, natively: the bindings pass and
// read C structs (the canonical layout on wasm32), and free what the host
// returns, so everything returned is malloc'd.
static tool_component_string_t host_string(const char *s) {
    tool_component_string_t out;
    tool_component_string_dup(&out, s);
    return out;
}

static toolcage_tool_host_list_root_t host_roots(void) {
    toolcage_tool_host_list_root_t list;
    list.len = 2;
    list.ptr = malloc(2 * sizeof *list.ptr);
    list.ptr[0].uri = host_string("file:///work");
    list.ptr[0].name.is_some = true;
    list.ptr[0].name.val = host_string("work");
    list.ptr[1].uri = host_string("file:///tmp");
    list.ptr[1].name.is_some = false;
    return list;
}

static bool roots_refused;
void __wasm_import_toolcage_tool_host_roots(uint8_t *ret) {
    // The bindings read the result at the canonical offsets: the tag, then
    // the payload one pointer in.
    *ret = roots_refused;
    if (roots_refused) {
        tool_component_string_t err = host_string("the client does not share its roots");
        memcpy(ret + sizeof(void *), &err, sizeof err);
    } else {
        toolcage_tool_host_list_root_t list = host_roots();
        memcpy(ret + sizeof(void *), &list, sizeof list);
    }
}

// What the last `ask` asked: keys and kinds, as "key:kind," text.
static char asked[256];
void __wasm_import_toolcage_tool_host_ask(uint8_t *questions, size_t len, uint8_t *ret) {
    toolcage_tool_host_keyed_question_t *q = (toolcage_tool_host_keyed_question_t *)questions;
    toolcage_tool_host_list_result_answer_string_t answers;
    answers.len = len;
    answers.ptr = malloc(len * sizeof *answers.ptr);
    asked[0] = '\0';
    for (size_t i = 0; i < len; i++) {
        toolcage_tool_host_result_answer_string_t *a = &answers.ptr[i];
        memset(a, 0, sizeof *a);
        snprintf(asked + strlen(asked), sizeof asked - strlen(asked), "%.*s:%d,", (int)q[i].key.len,
                 (const char *)q[i].key.ptr, q[i].question.tag);
        if (q[i].key.len == 7 && memcmp(q[i].key.ptr, "refused", 7) == 0) {
            a->is_err = true;
            a->val.err = host_string("the client cannot answer");
            continue;
        }
        a->val.ok.tag = q[i].question.tag;
        switch (q[i].question.tag) {
        case TOOLCAGE_TOOL_HOST_QUESTION_ELICIT:
            a->val.ok.val.elicit.tag = TOOLCAGE_TOOL_HOST_ELICIT_RESPONSE_ACCEPT;
            a->val.ok.val.elicit.val.accept = host_string("{\"n\":1}");
            break;
        case TOOLCAGE_TOOL_HOST_QUESTION_SAMPLE:
            a->val.ok.val.sample.text = host_string("hi");
            a->val.ok.val.sample.model = host_string("m");
            a->val.ok.val.sample.stop_reason.is_some = false;
            break;
        default:
            a->val.ok.val.roots = host_roots();
        }
    }
    memcpy(ret, &answers, sizeof answers);
}
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

TOOLCAGE_TOOLS(
    {.name = "dummy", .description = "d", .run = dummy},
    {
        .name = "decorated",
        .description = "Has what contract 0.2.0 added.",
        .run = dummy,
        .icons = TOOLCAGE_ICONS({.src = "https://example.com/d.png", .mime_type = "image/png",
                                 .sizes = " 48x48  96x96 ", .theme = TOOLCAGE_ICON_DARK},
                                {.src = "data:image/svg+xml;base64,PHN2Zy8+"}),
        .task_support = TOOLCAGE_TASK_OPTIONAL,
        .task_start = TOOLCAGE_TASK_START_ON_BEGIN_TASK,
        .needs = TOOLCAGE_NEEDS_ELICITATION | TOOLCAGE_NEEDS_ROOTS | 0x80,
    });

static bool host_string_is(const tool_component_string_t *s, const char *want) {
    return s->len == strlen(want) && memcmp(s->ptr, want, s->len) == 0;
}

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
    CHECK(list.len == 2 && list.ptr[0].name.len == 5 && !list.ptr[0].title.is_some &&
          list.ptr[0].input_schema.len == strlen("{\"type\":\"object\"}"));
    // The 0.2.0 fields: defaults, then each one set.
    CHECK(list.ptr[0].icons.len == 0 && list.ptr[0].task_support == TOOLCAGE_TOOL_TYPES_TASK_SUPPORT_FORBIDDEN &&
          list.ptr[0].task_start == TOOLCAGE_TOOL_TYPES_TASK_START_WITH_CALL && list.ptr[0].needs == 0);
    exports_toolcage_tool_tool_descriptor_t *decorated = &list.ptr[1];
    CHECK(decorated->icons.len == 2);
    toolcage_tool_types_icon_t *icon = &decorated->icons.ptr[0];
    CHECK(host_string_is(&icon->src, "https://example.com/d.png"));
    CHECK(icon->mime_type.is_some && host_string_is(&icon->mime_type.val, "image/png"));
    CHECK(icon->sizes.len == 2 && host_string_is(&icon->sizes.ptr[0], "48x48") &&
          host_string_is(&icon->sizes.ptr[1], "96x96"));
    CHECK(icon->theme.is_some && icon->theme.val == TOOLCAGE_TOOL_TYPES_ICON_THEME_DARK);
    icon = &decorated->icons.ptr[1];
    CHECK(!icon->mime_type.is_some && icon->sizes.len == 0 && !icon->theme.is_some);
    CHECK(decorated->task_support == TOOLCAGE_TOOL_TYPES_TASK_SUPPORT_OPTIONAL);
    CHECK(decorated->task_start == TOOLCAGE_TOOL_TYPES_TASK_START_ON_BEGIN_TASK);
    // An unknown bit is dropped: the host would trap on it.
    CHECK(decorated->needs == (TOOLCAGE_TOOL_TYPES_CLIENT_NEEDS_ELICITATION | TOOLCAGE_TOOL_TYPES_CLIENT_NEEDS_ROOTS));
    exports_toolcage_tool_tool_list_descriptor_free(&list);

    // Roots, and their refusal.
    toolcage_root *roots;
    size_t root_count;
    char *error;
    CHECK(toolcage_roots(&roots, &root_count, &error) && root_count == 2 && !error);
    CHECK(strcmp(roots[0].uri, "file:///work") == 0 && strcmp(roots[0].name, "work") == 0);
    CHECK(strcmp(roots[1].uri, "file:///tmp") == 0 && roots[1].name == NULL);
    toolcage_roots_free(roots, root_count);
    roots_refused = true;
    CHECK(!toolcage_roots(&roots, &root_count, &error) && roots == NULL && root_count == 0);
    CHECK(error && strcmp(error, "the client does not share its roots") == 0);
    free(error);
    roots_refused = false;

    // Keyed questions: each kind, and one the client cannot answer.
    toolcage_question questions[] = {
        {.key = "who", .kind = TOOLCAGE_ASK_ELICIT, .message = "Who?", .schema = "{\"type\":\"object\"}"},
        {.key = "say", .kind = TOOLCAGE_ASK_SAMPLE, .prompt = "Say hi", .max_tokens = 5},
        {.key = "where", .kind = TOOLCAGE_ASK_ROOTS},
        {.key = "refused", .kind = TOOLCAGE_ASK_ROOTS},
    };
    toolcage_reply replies[4];
    toolcage_ask(questions, 4, replies);
    CHECK(strcmp(asked, "who:0,say:1,where:2,refused:2,") == 0);
    CHECK(!replies[0].error && replies[0].action == TOOLCAGE_ELICIT_ACCEPT && strcmp(replies[0].values, "{\"n\":1}") == 0);
    CHECK(!replies[1].error && strcmp(replies[1].text, "hi") == 0);
    CHECK(!replies[2].error && replies[2].root_count == 2 && strcmp(replies[2].roots[1].uri, "file:///tmp") == 0);
    CHECK(replies[3].error && strcmp(replies[3].error, "the client cannot answer") == 0 &&
          replies[3].action == TOOLCAGE_ELICIT_FAILED && replies[3].roots == NULL);
    for (size_t i = 0; i < 4; i++) toolcage_reply_free(&replies[i]);
    char *values;
    CHECK(toolcage_elicit_as("confirm_it", "Sure?", NULL, &values, &error) == TOOLCAGE_ELICIT_ACCEPT);
    CHECK(strcmp(asked, "confirm_it:0,") == 0 && values && strcmp(values, "{\"n\":1}") == 0 && !error);
    free(values);
    CHECK(toolcage_elicit_as("refused", "Sure?", NULL, &values, &error) == TOOLCAGE_ELICIT_FAILED);
    CHECK(!values && error && strcmp(error, "the client cannot answer") == 0);
    free(error);
    toolcage_begin_task();
    CHECK(begun == 1);

    printf("%d passed, %d failed\n", checks - failures, failures);
    return failures != 0;
}
