/*
 * toolcage.h: write toolcage tools in C.
 *
 * A header-only helper over the wit-bindgen C bindings of the toolcage
 * contract (guest-sdk/wit/tool.wit, `toolcage:tool@0.2.0`, world
 * `tool-component`: tools only), which live in
 * guest-sdk/c/bindings/ (tool_component.h and tool_component.c: generated,
 * committed, and rebuilt by guest-sdk/c/regenerate-bindings; in a project
 * made by `toolcage new`, toolcage/bindings/). guest-sdk/c/build compiles
 * and links them with your sources into a component; see README.md there.
 *
 * A tool component in C is one or more functions of type `toolcage_handler`
 * and one registration list:
 *
 *     #include "toolcage.h"
 *
 *     static void greet(const char *args, toolcage_result *result) {
 *         char *name;
 *         if (!toolcage_arg_string(args, "name", &name)) {
 *             toolcage_error(result, "`name` must be a string");
 *             return;
 *         }
 *         toolcage_textf(result, "Hello, %s!", name);
 *         free(name);
 *     }
 *
 *     TOOLCAGE_TOOLS(
 *         {
 *             .name = "greet",
 *             .description = "Greets someone by name.",
 *             .input_schema = TOOLCAGE_JSON({
 *                 "type": "object",
 *                 "properties": {"name": {"type": "string"}},
 *                 "required": ["name"]
 *             }),
 *             .read_only = true,
 *             .run = greet,
 *         },
 *     );
 *
 * `TOOLCAGE_TOOLS` defines the component's exported `describe` (the list,
 * in order) and `call` (dispatch by name); it must appear in exactly one
 * source file of the component. Every other function here is `static
 * inline`, so the header can be included from any number of files.
 *
 * Ownership. Everything the helper hands to the host is a fresh copy in
 * memory from malloc: the generated bindings free a call's result after the
 * host has read it (the `cabi_post_*` functions), so a result must never
 * point at a string literal, a stack buffer or anything you free yourself.
 * Pass your own strings to the builders and keep or free them as you like.
 * Strings the helper returns to you (`toolcage_arg_string`, the `error` of
 * `toolcage_confirm`, `toolcage_printf`, ...) are yours: release them with
 * free(). Each call runs in a fresh instance, so a leak lasts one call; free
 * anyway when a tool allocates in a loop.
 *
 * Text. The host requires UTF-8. Every string the helper copies to the host
 * is checked, and an invalid byte sequence is replaced by U+FFFD instead of
 * trapping the call.
 *
 * Allocation failure. The helper aborts (a trap) when malloc fails; when the
 * memory limit refused to grow, the host reports that limit to the client.
 */
#ifndef TOOLCAGE_H
#define TOOLCAGE_H

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tool_component.h"

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define TOOLCAGE__PRINTF(fmt, first) __attribute__((format(printf, fmt, first)))
#define TOOLCAGE__NORETURN __attribute__((noreturn))
#else
#define TOOLCAGE__PRINTF(fmt, first)
#define TOOLCAGE__NORETURN
#endif

/* ------------------------------------------------------------------------ */
/* Tools and registration                                                   */
/* ------------------------------------------------------------------------ */

/*
 * The result a tool builds: the contract's `call-result` record, filled
 * through the builders below (`toolcage_text`, `toolcage_structured`,
 * `toolcage_error`, ...). It starts empty and successful.
 */
typedef toolcage_tool_types_call_result_t toolcage_result;

/*
 * A tool's function. `args` is the arguments object as NUL-terminated JSON
 * text (read it with the `toolcage_arg_*` functions); the host has checked
 * it against the tool's input schema, but the helpers do not rely on that.
 * `args` belongs to the helper and is freed after the function returns.
 * Fill `result`; returning without adding anything gives an empty,
 * successful result.
 */
typedef void (*toolcage_handler)(const char *args, toolcage_result *result);

/* The theme an icon suits (`toolcage_icon.theme`). */
typedef enum toolcage_icon_theme {
    /* Any theme (the default). */
    TOOLCAGE_ICON_ANY_THEME = 0,
    TOOLCAGE_ICON_LIGHT,
    TOOLCAGE_ICON_DARK,
} toolcage_icon_theme;

/*
 * An icon a client may show beside a tool (MCP `Icon`). The host refuses a
 * tool whose icons break these rules, and lists at most 8.
 */
typedef struct toolcage_icon {
    /* An `https:` URL (the client fetches it) or a `data:image/...` URI (at
       most 64 KiB). */
    const char *src;
    /* `image/png`, `image/svg+xml`, ..., or NULL when the URL makes it
       plain. */
    const char *mime_type;
    /* The sizes it is drawn for, separated by spaces as in HTML's `sizes`
       attribute: "48x48 96x96", or "any"; NULL for none. */
    const char *sizes;
    toolcage_icon_theme theme;
} toolcage_icon;

/*
 * A tool's icon list, for `toolcage_tool.icons`: a comma-separated list of
 * `toolcage_icon` initializers, with no trailing comma:
 * `.icons = TOOLCAGE_ICONS({.src = "https://example.com/i.png", .sizes = "48x48"})`.
 * (A file-scope compound literal, ended by an icon whose `src` is NULL.)
 */
#define TOOLCAGE_ICONS(...) ((const toolcage_icon[]){__VA_ARGS__, {NULL, NULL, NULL, TOOLCAGE_ICON_ANY_THEME}})

/*
 * Whether calls of a tool may run as MCP tasks (protocol 2026-07-28), in
 * `toolcage_tool.task_support`. The operator's `tasks = "..."` overrides it.
 */
typedef enum toolcage_task_support {
    /* Every call answers in its request (the default). */
    TOOLCAGE_TASK_FORBIDDEN = TOOLCAGE_TOOL_TYPES_TASK_SUPPORT_FORBIDDEN,
    /* A task when the client accepts tasks; in the request otherwise. */
    TOOLCAGE_TASK_OPTIONAL = TOOLCAGE_TOOL_TYPES_TASK_SUPPORT_OPTIONAL,
    /* Only as a task: other clients are refused before the call runs. */
    TOOLCAGE_TASK_REQUIRED = TOOLCAGE_TOOL_TYPES_TASK_SUPPORT_REQUIRED,
} toolcage_task_support;

/* When a call that runs as a task becomes one (`toolcage_tool.task_start`). */
typedef enum toolcage_task_start {
    /* As soon as the call starts (the default). */
    TOOLCAGE_TASK_START_WITH_CALL = TOOLCAGE_TOOL_TYPES_TASK_START_WITH_CALL,
    /* When the call invokes `toolcage_begin_task()`; questions asked before
       that are asked in the request. */
    TOOLCAGE_TASK_START_ON_BEGIN_TASK = TOOLCAGE_TOOL_TYPES_TASK_START_ON_BEGIN_TASK,
} toolcage_task_start;

/*
 * What a client must be able to do for a tool to work, or-ed together in
 * `toolcage_tool.needs`: a 2026-07-28 request that does not declare it is
 * refused (error -32021) before the call runs.
 */
#define TOOLCAGE_NEEDS_SAMPLING TOOLCAGE_TOOL_TYPES_CLIENT_NEEDS_SAMPLING
#define TOOLCAGE_NEEDS_ELICITATION TOOLCAGE_TOOL_TYPES_CLIENT_NEEDS_ELICITATION
#define TOOLCAGE_NEEDS_ROOTS TOOLCAGE_TOOL_TYPES_CLIENT_NEEDS_ROOTS
#define TOOLCAGE__NEEDS_ALL (TOOLCAGE_NEEDS_SAMPLING | TOOLCAGE_NEEDS_ELICITATION | TOOLCAGE_NEEDS_ROOTS)

/*
 * One tool, as registered in `TOOLCAGE_TOOLS`. Use designated initializers;
 * fields left out are NULL, false or the default.
 */
typedef struct toolcage_tool {
    /* Unique within the server: 1 to 128 of `A-Z a-z 0-9 _ - .`. */
    const char *name;
    /* A short human-readable title, or NULL. */
    const char *title;
    /* Written for a model: what the tool does, when to use it, what it
       returns. */
    const char *description;
    /* JSON Schema (text) of the arguments object; its root must be an
       object schema. NULL means `{"type":"object"}` (no arguments). */
    const char *input_schema;
    /* JSON Schema (text) of the structured output, or NULL. When set, every
       successful result must carry structured output that matches it (use
       `toolcage_structured`): the host checks. */
    const char *output_schema;
    /* Annotations (MCP ToolAnnotations): hints for clients, not
       guarantees. */
    bool read_only;
    bool destructive;
    bool idempotent;
    bool open_world;
    /* The function that runs the tool. */
    toolcage_handler run;
    /* Icons for clients to show: `TOOLCAGE_ICONS(...)`, or NULL for none. */
    const toolcage_icon *icons;
    /* Whether calls may run as tasks (default TOOLCAGE_TASK_FORBIDDEN). */
    toolcage_task_support task_support;
    /* When a task-run call becomes a task (default
       TOOLCAGE_TASK_START_WITH_CALL). */
    toolcage_task_start task_start;
    /* TOOLCAGE_NEEDS_* or-ed together (default 0: nothing). */
    unsigned needs;
} toolcage_tool;

/*
 * Stringify JSON written as plain tokens, so that schemas need no escaped
 * quotes: `TOOLCAGE_JSON({"type": "object"})` is the string literal
 * "{\"type\": \"object\"}". Runs of whitespace become one space, which JSON
 * ignores outside strings (inside a string, write `\n` and friends as
 * usual: they are kept as escapes). Parentheses must balance outside string
 * literals.
 */
#define TOOLCAGE_JSON(...) #__VA_ARGS__

static inline void toolcage__describe(const toolcage_tool *tools, size_t count,
                                      exports_toolcage_tool_tool_list_descriptor_t *ret);
static inline void toolcage__call(const toolcage_tool *tools, size_t count,
                                  tool_component_string_t *name,
                                  tool_component_string_t *arguments,
                                  exports_toolcage_tool_tool_call_result_t *ret);

/*
 * Register the component's tools: a comma-separated list of `toolcage_tool`
 * initializers (`{ .name = ..., .run = ... }`), in the order `describe`
 * lists them. Defines the exported `describe` and `call`; use it once, at
 * file scope, in one source file. A call for a name that is not in the list
 * gets the error result "this component has no tool `NAME`". End it with a
 * semicolon: `TOOLCAGE_TOOLS({...}, {...});`.
 */
#define TOOLCAGE_TOOLS(...)                                                          \
    static const toolcage_tool toolcage__tools[] = {__VA_ARGS__};                  \
    void exports_toolcage_tool_tool_describe(                                        \
        exports_toolcage_tool_tool_list_descriptor_t *ret) {                         \
        toolcage__describe(toolcage__tools,                                          \
                           sizeof toolcage__tools / sizeof toolcage__tools[0], ret); \
    }                                                                                \
    void exports_toolcage_tool_tool_call(tool_component_string_t *name,              \
                                         tool_component_string_t *arguments,         \
                                         exports_toolcage_tool_tool_call_result_t *ret) { \
        toolcage__call(toolcage__tools,                                              \
                       sizeof toolcage__tools / sizeof toolcage__tools[0], name,     \
                       arguments, ret);                                              \
    }                                                                                \
    typedef int toolcage__tools_defined /* swallows the caller's semicolon */

/* ------------------------------------------------------------------------ */
/* Memory and strings (internal, but usable)                                */
/* ------------------------------------------------------------------------ */

/* malloc that aborts (traps) instead of returning NULL. */
static inline void *toolcage__xmalloc(size_t size) {
    void *p = malloc(size ? size : 1);
    if (!p) abort();
    return p;
}

/* realloc that aborts (traps) instead of returning NULL. */
static inline void *toolcage__xrealloc(void *ptr, size_t size) {
    void *p = realloc(ptr, size ? size : 1);
    if (!p) abort();
    return p;
}

/* Length of the valid UTF-8 sequence at s[0..len), or 0 if it is not one. */
static inline size_t toolcage__utf8_seq(const unsigned char *s, size_t len) {
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    size_t n;
    uint32_t min, cp;
    if (c >= 0xC2 && c <= 0xDF) { n = 2; min = 0x80; cp = c & 0x1F; }
    else if (c >= 0xE0 && c <= 0xEF) { n = 3; min = 0x800; cp = c & 0x0F; }
    else if (c >= 0xF0 && c <= 0xF4) { n = 4; min = 0x10000; cp = c & 0x07; }
    else return 0;
    if (len < n) return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return n;
}

/*
 * Copy `len` bytes at `s` into a host string owned by the component (freed
 * by the bindings after the host reads it), replacing each invalid UTF-8
 * byte with U+FFFD. An empty string is stored without an allocation.
 */
static inline void toolcage__string_n(tool_component_string_t *out, const char *s, size_t len) {
    const unsigned char *u = (const unsigned char *)s;
    size_t need = 0;
    for (size_t i = 0; i < len;) {
        size_t n = toolcage__utf8_seq(u + i, len - i);
        if (n) { need += n; i += n; }
        else { need += 3; i += 1; }
    }
    if (need == 0) {
        out->ptr = NULL;
        out->len = 0;
        return;
    }
    uint8_t *dst = (uint8_t *)toolcage__xmalloc(need);
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        size_t n = toolcage__utf8_seq(u + i, len - i);
        if (n) {
            memcpy(dst + o, u + i, n);
            o += n;
            i += n;
        } else {
            dst[o++] = 0xEF; dst[o++] = 0xBF; dst[o++] = 0xBD;
            i += 1;
        }
    }
    out->ptr = dst;
    out->len = o;
}

/* `toolcage__string_n` for a NUL-terminated string (NULL is ""). */
static inline void toolcage__string(tool_component_string_t *out, const char *s) {
    toolcage__string_n(out, s ? s : "", s ? strlen(s) : 0);
}

/* An optional host string: none for NULL, a copy otherwise. */
static inline void toolcage__option_string(tool_component_option_string_t *out, const char *s) {
    out->is_some = s != NULL;
    if (s) toolcage__string(&out->val, s);
    else { out->val.ptr = NULL; out->val.len = 0; }
}

/* A NUL-terminated malloc copy of a string the host gave us. */
static inline char *toolcage__cstring(const tool_component_string_t *s) {
    char *out = (char *)toolcage__xmalloc(s->len + 1);
    if (s->len) memcpy(out, s->ptr, s->len);
    out[s->len] = '\0';
    return out;
}

/*
 * Format like vsprintf into a new malloc'd string (free() it). Aborts if
 * the format is invalid or memory runs out.
 */
static inline char *toolcage_vprintf(const char *fmt, va_list ap) {
    va_list copy;
    va_copy(copy, ap);
    int n = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (n < 0) abort();
    char *out = (char *)toolcage__xmalloc((size_t)n + 1);
    vsnprintf(out, (size_t)n + 1, fmt, ap);
    return out;
}

/* Format like sprintf into a new malloc'd string (free() it). */
TOOLCAGE__PRINTF(1, 2)
static inline char *toolcage_printf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *out = toolcage_vprintf(fmt, ap);
    va_end(ap);
    return out;
}

/*
 * `s` as a JSON string literal, quotes included, in a new malloc'd string
 * (free() it): for building structured output from text, e.g.
 * `char *q = toolcage_json_quote(name);
 *  char *json = toolcage_printf("{\"name\":%s}", q);`.
 * Escapes `"`, `\` and control characters; NULL gives `null`.
 */
static inline char *toolcage_json_quote(const char *s) {
    if (!s) {
        char *n = (char *)toolcage__xmalloc(5);
        memcpy(n, "null", 5);
        return n;
    }
    size_t len = strlen(s), need = 2;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        need += (c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' ||
                 c == '\r' || c == '\t') ? 2 : c < 0x20 ? 6 : 1;
    }
    char *out = (char *)toolcage__xmalloc(need + 1), *o = out;
    *o++ = '"';
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': *o++ = '\\'; *o++ = '"'; break;
        case '\\': *o++ = '\\'; *o++ = '\\'; break;
        case '\b': *o++ = '\\'; *o++ = 'b'; break;
        case '\f': *o++ = '\\'; *o++ = 'f'; break;
        case '\n': *o++ = '\\'; *o++ = 'n'; break;
        case '\r': *o++ = '\\'; *o++ = 'r'; break;
        case '\t': *o++ = '\\'; *o++ = 't'; break;
        default:
            if (c < 0x20) {
                snprintf(o, 7, "\\u%04x", c);
                o += 6;
            } else {
                *o++ = (char)c;
            }
        }
    }
    *o++ = '"';
    *o = '\0';
    return out;
}

/*
 * Stop the call with a message, like a Rust panic: prints
 * "panicked at FILE:LINE:" and the message (formatted like printf) to
 * stderr, which the host reads, then aborts. The client sees "tool `NAME`
 * panicked: MESSAGE (at FILE:LINE)". For bugs; report a failure the model
 * should act on with `toolcage_error` instead. (A bare abort() or a failed
 * assert() shows only as "crashed: wasm trap".)
 */
#define toolcage_panic(...) toolcage__panic(__FILE__, __LINE__, __VA_ARGS__)

TOOLCAGE__PRINTF(3, 4) TOOLCAGE__NORETURN
static inline void toolcage__panic(const char *file, int line, const char *fmt, ...) {
    const char *base = strrchr(file, '/');
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "thread 'main' panicked at %s:%d:\n", base ? base + 1 : file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    fflush(stderr);
    va_end(ap);
    abort();
}

/* ------------------------------------------------------------------------ */
/* Results                                                                  */
/* ------------------------------------------------------------------------ */

/* Append one content item (internal). */
static inline toolcage_tool_types_content_t *toolcage__push(toolcage_result *result, uint8_t tag) {
    size_t n = result->content.len;
    result->content.ptr = (toolcage_tool_types_content_t *)toolcage__xrealloc(
        result->content.ptr, (n + 1) * sizeof *result->content.ptr);
    toolcage_tool_types_content_t *item = &result->content.ptr[n];
    memset(item, 0, sizeof *item);
    item->tag = tag;
    result->content.len = n + 1;
    return item;
}

/* A host byte list owned by the component (internal). */
static inline void toolcage__bytes(tool_component_list_u8_t *out, const void *data, size_t len) {
    out->len = len;
    out->ptr = NULL;
    if (len) {
        out->ptr = (uint8_t *)toolcage__xmalloc(len);
        memcpy(out->ptr, data, len);
    }
}

/* Add a text item (a copy of `text`; NULL is ""). */
static inline void toolcage_text(toolcage_result *result, const char *text) {
    toolcage__string(&toolcage__push(result, TOOLCAGE_TOOL_TYPES_CONTENT_TEXT)->val.text, text);
}

/* Add a text item formatted like printf. */
TOOLCAGE__PRINTF(2, 3)
static inline void toolcage_textf(toolcage_result *result, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *text = toolcage_vprintf(fmt, ap);
    va_end(ap);
    toolcage_text(result, text);
    free(text);
}

/*
 * Set the structured output to `json` (a JSON object as text; not checked
 * here, the host checks it against the output schema) and add a text item
 * with the same JSON, for clients that ignore structured output. Setting it
 * again replaces the structured output (and adds another text item).
 */
static inline void toolcage_structured(toolcage_result *result, const char *json) {
    tool_component_option_string_free(&result->structured);
    toolcage__option_string(&result->structured, json ? json : "{}");
    toolcage_text(result, json ? json : "{}");
}

/* `toolcage_structured` with the JSON formatted like printf. */
TOOLCAGE__PRINTF(2, 3)
static inline void toolcage_structuredf(toolcage_result *result, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *json = toolcage_vprintf(fmt, ap);
    va_end(ap);
    toolcage_structured(result, json);
    free(json);
}

/*
 * Make the result an error the model reads: drops whatever content and
 * structured output it had, sets `is-error`, and adds one text item
 * formatted like printf. To pass text through unchanged, write
 * `toolcage_error(result, "%s", message)`, never `toolcage_error(result,
 * message)`.
 */
TOOLCAGE__PRINTF(2, 3)
static inline void toolcage_error(toolcage_result *result, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *text = toolcage_vprintf(fmt, ap);
    va_end(ap);
    toolcage_tool_types_list_content_free(&result->content);
    result->content.ptr = NULL;
    result->content.len = 0;
    tool_component_option_string_free(&result->structured);
    result->structured.is_some = false;
    result->is_error = true;
    toolcage_text(result, text);
    free(text);
}

/* Add an image item: a copy of `len` bytes of `data`, e.g. "image/png". */
static inline void toolcage_image(toolcage_result *result, const void *data, size_t len,
                                  const char *mime_type) {
    toolcage_tool_types_content_t *item = toolcage__push(result, TOOLCAGE_TOOL_TYPES_CONTENT_IMAGE);
    toolcage__bytes(&item->val.image.data, data, len);
    toolcage__string(&item->val.image.mime_type, mime_type);
}

/* Add an audio item: a copy of `len` bytes of `data`, e.g. "audio/wav". */
static inline void toolcage_audio(toolcage_result *result, const void *data, size_t len,
                                  const char *mime_type) {
    toolcage_tool_types_content_t *item = toolcage__push(result, TOOLCAGE_TOOL_TYPES_CONTENT_AUDIO);
    toolcage__bytes(&item->val.audio.data, data, len);
    toolcage__string(&item->val.audio.mime_type, mime_type);
}

/* Add an embedded text resource (`mime_type` may be NULL). */
static inline void toolcage_resource_text(toolcage_result *result, const char *uri,
                                          const char *mime_type, const char *text) {
    toolcage_tool_types_content_t *item = toolcage__push(result, TOOLCAGE_TOOL_TYPES_CONTENT_EMBEDDED);
    toolcage__string(&item->val.embedded.uri, uri);
    toolcage__option_string(&item->val.embedded.mime_type, mime_type);
    item->val.embedded.body.tag = TOOLCAGE_TOOL_TYPES_RESOURCE_BODY_TEXT;
    toolcage__string(&item->val.embedded.body.val.text, text);
}

/* Add an embedded binary resource (`mime_type` may be NULL). */
static inline void toolcage_resource_blob(toolcage_result *result, const char *uri,
                                          const char *mime_type, const void *data, size_t len) {
    toolcage_tool_types_content_t *item = toolcage__push(result, TOOLCAGE_TOOL_TYPES_CONTENT_EMBEDDED);
    toolcage__string(&item->val.embedded.uri, uri);
    toolcage__option_string(&item->val.embedded.mime_type, mime_type);
    item->val.embedded.body.tag = TOOLCAGE_TOOL_TYPES_RESOURCE_BODY_BLOB;
    toolcage__bytes(&item->val.embedded.body.val.blob, data, len);
}

/* ------------------------------------------------------------------------ */
/* Arguments: reading top-level fields of a JSON object                     */
/* ------------------------------------------------------------------------ */
/*
 * A small, strict JSON reader. Each `toolcage_arg_*` call scans the whole
 * arguments text: it must be one JSON object (RFC 8259, nesting at most 128
 * deep), or the call finds nothing. It never reads past the terminating
 * NUL. When a key occurs more than once, the last occurrence counts (as in
 * the host's JSON parser). Each returns true and stores the value only when
 * the key is present with a value of the asked-for type; on false, `*out` is
 * left untouched, so a default set before the call survives.
 */

#define TOOLCAGE__JSON_MAX_DEPTH 128

typedef struct {
    const char *p;
} toolcage__json;

static inline void toolcage__json_ws(toolcage__json *j) {
    while (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r') j->p++;
}

static inline int toolcage__hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Four hex digits at p (p has at least the NUL after it). */
static inline long toolcage__hex4(const char *p) {
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int h = toolcage__hex(p[i]); /* stops at NUL: hex('\0') is -1 */
        if (h < 0) return -1;
        v = v * 16 + h;
    }
    return v;
}

/* Skip a string token at j->p (which is at '"'). */
static inline bool toolcage__json_skip_string(toolcage__json *j) {
    const char *p = j->p + 1;
    for (;;) {
        unsigned char c = (unsigned char)*p;
        if (c == '\0' || c < 0x20) return false;
        if (c == '"') break;
        if (c == '\\') {
            char e = p[1];
            if (e == 'u') {
                if (toolcage__hex4(p + 2) < 0) return false;
                p += 6;
            } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' ||
                       e == 'n' || e == 'r' || e == 't') {
                p += 2;
            } else {
                return false;
            }
        } else {
            p++;
        }
    }
    j->p = p + 1;
    return true;
}

static inline bool toolcage__json_skip_number(toolcage__json *j) {
    const char *p = j->p;
    if (*p == '-') p++;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') while (*p >= '0' && *p <= '9') p++;
    else return false;
    if (*p == '.') {
        p++;
        if (!(*p >= '0' && *p <= '9')) return false;
        while (*p >= '0' && *p <= '9') p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!(*p >= '0' && *p <= '9')) return false;
        while (*p >= '0' && *p <= '9') p++;
    }
    j->p = p;
    return true;
}

static inline bool toolcage__json_skip_value(toolcage__json *j, int depth) {
    toolcage__json_ws(j);
    switch (*j->p) {
    case '"':
        return toolcage__json_skip_string(j);
    case '{':
    case '[': {
        char close = *j->p == '{' ? '}' : ']';
        bool object = close == '}';
        if (depth >= TOOLCAGE__JSON_MAX_DEPTH) return false;
        j->p++;
        toolcage__json_ws(j);
        if (*j->p == close) { j->p++; return true; }
        for (;;) {
            if (object) {
                toolcage__json_ws(j);
                if (*j->p != '"' || !toolcage__json_skip_string(j)) return false;
                toolcage__json_ws(j);
                if (*j->p != ':') return false;
                j->p++;
            }
            if (!toolcage__json_skip_value(j, depth + 1)) return false;
            toolcage__json_ws(j);
            if (*j->p == ',') { j->p++; continue; }
            if (*j->p == close) { j->p++; return true; }
            return false;
        }
    }
    case 't':
        if (strncmp(j->p, "true", 4) != 0) return false;
        j->p += 4;
        return true;
    case 'f':
        if (strncmp(j->p, "false", 5) != 0) return false;
        j->p += 5;
        return true;
    case 'n':
        if (strncmp(j->p, "null", 4) != 0) return false;
        j->p += 4;
        return true;
    default:
        return toolcage__json_skip_number(j);
    }
}

/*
 * Decode the (already validated) string token [start, end), quotes
 * included, into a new malloc'd NUL-terminated UTF-8 string; `*len` gets its
 * length in bytes (a `\u0000` in the text makes it longer than strlen).
 * Lone surrogates become U+FFFD.
 */
static inline char *toolcage__json_decode(const char *start, const char *end, size_t *len) {
    /* Every escape decodes to at most as many bytes as it takes. */
    char *out = (char *)toolcage__xmalloc((size_t)(end - start) + 1), *o = out;
    const char *p = start + 1, *stop = end - 1;
    while (p < stop) {
        if (*p != '\\') { *o++ = *p++; continue; }
        char e = p[1];
        p += 2;
        switch (e) {
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            uint32_t cp = (uint32_t)toolcage__hex4(p);
            p += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF && p + 6 <= stop && p[0] == '\\' && p[1] == 'u') {
                long lo = toolcage__hex4(p + 2);
                if (lo >= 0xDC00 && lo <= 0xDFFF) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + ((uint32_t)lo - 0xDC00);
                    p += 6;
                }
            }
            if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
            if (cp < 0x80) {
                *o++ = (char)cp;
            } else if (cp < 0x800) {
                *o++ = (char)(0xC0 | (cp >> 6));
                *o++ = (char)(0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
                *o++ = (char)(0xE0 | (cp >> 12));
                *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
                *o++ = (char)(0x80 | (cp & 0x3F));
            } else {
                *o++ = (char)(0xF0 | (cp >> 18));
                *o++ = (char)(0x80 | ((cp >> 12) & 0x3F));
                *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
                *o++ = (char)(0x80 | (cp & 0x3F));
            }
            break;
        }
        default: *o++ = e; break; /* " \ / */
        }
    }
    *o = '\0';
    if (len) *len = (size_t)(o - out);
    return out;
}

/*
 * Find top-level `key` in the JSON object `args`: on success, [*start,
 * *end) is its value's token (the last occurrence). False if `args` is not
 * one well-formed JSON object or has no such key.
 */
static inline bool toolcage__json_find(const char *args, const char *key, const char **start,
                                       const char **end) {
    if (!args || !key) return false;
    size_t key_len = strlen(key);
    toolcage__json j = {args};
    bool found = false;
    toolcage__json_ws(&j);
    if (*j.p != '{') return false;
    j.p++;
    toolcage__json_ws(&j);
    if (*j.p == '}') {
        j.p++;
    } else {
        for (;;) {
            toolcage__json_ws(&j);
            const char *k = j.p;
            if (*j.p != '"' || !toolcage__json_skip_string(&j)) return false;
            const char *k_end = j.p;
            toolcage__json_ws(&j);
            if (*j.p != ':') return false;
            j.p++;
            toolcage__json_ws(&j);
            const char *v = j.p;
            if (!toolcage__json_skip_value(&j, 1)) return false;
            const char *v_end = j.p;
            size_t len;
            char *name = toolcage__json_decode(k, k_end, &len);
            if (len == key_len && memcmp(name, key, len) == 0) {
                *start = v;
                *end = v_end;
                found = true;
            }
            free(name);
            toolcage__json_ws(&j);
            if (*j.p == ',') { j.p++; continue; }
            if (*j.p == '}') { j.p++; break; }
            return false;
        }
    }
    toolcage__json_ws(&j);
    return *j.p == '\0' && found;
}

/*
 * String field `key`: stores a new malloc'd, NUL-terminated UTF-8 copy in
 * `*out` (free() it) and, if `len` is not NULL, its length in bytes (which
 * exceeds strlen when the text has `\u0000`). False when absent or not a
 * string.
 */
static inline bool toolcage_arg_stringn(const char *args, const char *key, char **out, size_t *len) {
    const char *v, *v_end;
    if (!toolcage__json_find(args, key, &v, &v_end) || *v != '"') return false;
    *out = toolcage__json_decode(v, v_end, len);
    return true;
}

/* String field `key` (see `toolcage_arg_stringn`): a malloc'd copy in `*out`. */
static inline bool toolcage_arg_string(const char *args, const char *key, char **out) {
    return toolcage_arg_stringn(args, key, out, NULL);
}

/* Number field `key`, any JSON number, as a double. False when absent, not a
   number, or out of the double range. */
static inline bool toolcage_arg_number(const char *args, const char *key, double *out) {
    const char *v, *v_end;
    if (!toolcage__json_find(args, key, &v, &v_end) || !(*v == '-' || (*v >= '0' && *v <= '9')))
        return false;
    size_t n = (size_t)(v_end - v);
    char *text = (char *)toolcage__xmalloc(n + 1);
    memcpy(text, v, n);
    text[n] = '\0';
    double d = strtod(text, NULL);
    free(text);
    if (!isfinite(d)) return false;
    *out = d;
    return true;
}

/*
 * Integer field `key` as an int64_t. Accepts what JSON Schema calls an
 * integer: `42`, `-7`, also `42.0` or `4.2e1` (a number with no fractional
 * part). False when absent, not a number, fractional, or outside int64_t.
 */
static inline bool toolcage_arg_int(const char *args, const char *key, int64_t *out) {
    const char *v, *v_end;
    if (!toolcage__json_find(args, key, &v, &v_end) || !(*v == '-' || (*v >= '0' && *v <= '9')))
        return false;
    const char *p = v;
    bool negative = *p == '-';
    if (negative) p++;
    uint64_t magnitude = 0;
    bool plain = true;
    for (const char *q = p; q < v_end; q++) {
        if (*q < '0' || *q > '9') { plain = false; break; }
    }
    if (plain) {
        for (; p < v_end; p++) {
            unsigned digit = (unsigned)(*p - '0');
            if (magnitude > (UINT64_MAX - digit) / 10) return false;
            magnitude = magnitude * 10 + digit;
        }
        if (negative) {
            if (magnitude > (uint64_t)INT64_MAX + 1) return false;
            *out = magnitude == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)magnitude;
        } else {
            if (magnitude > (uint64_t)INT64_MAX) return false;
            *out = (int64_t)magnitude;
        }
        return true;
    }
    double d;
    if (!toolcage_arg_number(args, key, &d)) return false;
    /* -2^63 <= d < 2^63, both exact as doubles. */
    if (d != floor(d) || d < -9223372036854775808.0 || d >= 9223372036854775808.0) return false;
    *out = (int64_t)d;
    return true;
}

/* Boolean field `key`. False when absent or not `true`/`false`. */
static inline bool toolcage_arg_bool(const char *args, const char *key, bool *out) {
    const char *v, *v_end;
    if (!toolcage__json_find(args, key, &v, &v_end)) return false;
    if (*v == 't') { *out = true; return true; }
    if (*v == 'f') { *out = false; return true; }
    return false;
}

/*
 * Any field `key` as its JSON text (an object, array, null, ...), in a new
 * malloc'd string (free() it), for a JSON library of your choice. False
 * when absent.
 */
static inline bool toolcage_arg_json(const char *args, const char *key, char **out) {
    const char *v, *v_end;
    if (!toolcage__json_find(args, key, &v, &v_end)) return false;
    size_t n = (size_t)(v_end - v);
    *out = (char *)toolcage__xmalloc(n + 1);
    memcpy(*out, v, n);
    (*out)[n] = '\0';
    return true;
}

/* ------------------------------------------------------------------------ */
/* Host services                                                            */
/* ------------------------------------------------------------------------ */

/* Log levels (the syslog levels MCP uses). */
typedef toolcage_tool_host_level_t toolcage_level;
#define TOOLCAGE_DEBUG TOOLCAGE_TOOL_HOST_LEVEL_DEBUG
#define TOOLCAGE_INFO TOOLCAGE_TOOL_HOST_LEVEL_INFO
#define TOOLCAGE_NOTICE TOOLCAGE_TOOL_HOST_LEVEL_NOTICE
#define TOOLCAGE_WARNING TOOLCAGE_TOOL_HOST_LEVEL_WARNING
#define TOOLCAGE_ERROR TOOLCAGE_TOOL_HOST_LEVEL_ERROR
#define TOOLCAGE_CRITICAL TOOLCAGE_TOOL_HOST_LEVEL_CRITICAL
#define TOOLCAGE_ALERT TOOLCAGE_TOOL_HOST_LEVEL_ALERT
#define TOOLCAGE_EMERGENCY TOOLCAGE_TOOL_HOST_LEVEL_EMERGENCY

/*
 * Send a log message, formatted like printf, to the server's log and, where
 * the client asked for that level, to the client. The host keeps a bounded
 * number of messages per call and truncates long ones.
 */
TOOLCAGE__PRINTF(2, 3)
static inline void toolcage_log(toolcage_level level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *text = toolcage_vprintf(fmt, ap);
    va_end(ap);
    tool_component_string_t message;
    toolcage__string(&message, text);
    free(text);
    toolcage_tool_host_log(level, &message);
    tool_component_string_free(&message);
}

/* For `toolcage_progress`: the total is not known. */
#define TOOLCAGE_NO_TOTAL (-1.0)

/*
 * Report progress: `done` of `total` (pass TOOLCAGE_NO_TOTAL, or any
 * negative or NaN value, when unknown), with an optional message (NULL for
 * none). Forwarded to clients whose request asked for progress; `done`
 * should grow from one report to the next.
 */
static inline void toolcage_progress(double done, double total, const char *message) {
    bool has_total = total >= 0; /* false for NaN too */
    tool_component_string_t text;
    if (message) toolcage__string(&text, message);
    toolcage_tool_host_progress(done, has_total ? &total : NULL, message ? &text : NULL);
    if (message) tool_component_string_free(&text);
}

/* The user's answer to `toolcage_elicit`. */
typedef enum toolcage_answer {
    /* The host could not ask (see `error`). */
    TOOLCAGE_ELICIT_FAILED = -1,
    TOOLCAGE_ELICIT_ACCEPT = TOOLCAGE_TOOL_HOST_ELICIT_RESPONSE_ACCEPT,
    TOOLCAGE_ELICIT_DECLINE = TOOLCAGE_TOOL_HOST_ELICIT_RESPONSE_DECLINE,
    TOOLCAGE_ELICIT_CANCEL = TOOLCAGE_TOOL_HOST_ELICIT_RESPONSE_CANCEL,
} toolcage_answer;

/*
 * Ask the user, through the client, for values: `requested_schema` is a
 * flat JSON object schema (text) of primitive properties. On ACCEPT,
 * `*values` (if not NULL) gets the answer, a JSON object as malloc'd text.
 * On FAILED (the client cannot elicit, or the request is malformed),
 * `*error` (if not NULL) gets the host's message, malloc'd, fit to pass on
 * to the model. free() both. Each pointer is set to NULL when not filled.
 *
 * Ask before acting: on clients of protocol revision 2026-07-28 the call is
 * replayed from the start once the user answers, so ask the same questions
 * in the same order for the same arguments.
 */
static inline toolcage_answer toolcage_elicit(const char *message, const char *requested_schema,
                                              char **values, char **error) {
    if (values) *values = NULL;
    if (error) *error = NULL;
    tool_component_string_t text, schema, err;
    toolcage_tool_host_elicit_response_t response;
    toolcage__string(&text, message);
    toolcage__string(&schema, requested_schema);
    bool ok = toolcage_tool_host_elicit(&text, &schema, &response, &err);
    tool_component_string_free(&text);
    tool_component_string_free(&schema);
    if (!ok) {
        if (error) *error = toolcage__cstring(&err);
        tool_component_string_free(&err);
        return TOOLCAGE_ELICIT_FAILED;
    }
    toolcage_answer answer = (toolcage_answer)response.tag;
    if (answer == TOOLCAGE_ELICIT_ACCEPT && values) *values = toolcage__cstring(&response.val.accept);
    toolcage_tool_host_elicit_response_free(&response);
    return answer;
}

/*
 * Ask the user a yes/no question: true only if they accept. False if they
 * decline or cancel, or if the host could not ask: then `*error` (if not
 * NULL) gets the host's message (malloc'd, free() it; NULL otherwise).
 */
static inline bool toolcage_confirm(const char *message, char **error) {
    return toolcage_elicit(message, "{\"type\":\"object\",\"properties\":{}}", NULL, error) ==
           TOOLCAGE_ELICIT_ACCEPT;
}

/*
 * Ask the client's model to complete `prompt` in at most `max_tokens`. On
 * success `*text` gets the completion (malloc'd); otherwise `*error` (if not
 * NULL) gets why: the operator has not allowed this tool to sample, the
 * client cannot, or the user refused. free() both.
 */
static inline bool toolcage_sample(const char *prompt, uint32_t max_tokens, char **text,
                                   char **error) {
    *text = NULL;
    if (error) *error = NULL;
    toolcage_tool_host_sampling_message_t message;
    message.role = TOOLCAGE_TOOL_HOST_ROLE_USER;
    toolcage__string(&message.text, prompt);
    toolcage_tool_host_sampling_request_t request;
    memset(&request, 0, sizeof request);
    request.messages.ptr = &message;
    request.messages.len = 1;
    request.max_tokens = max_tokens;
    toolcage_tool_host_sampling_response_t response;
    tool_component_string_t err;
    bool ok = toolcage_tool_host_sample(&request, &response, &err);
    tool_component_string_free(&message.text);
    if (!ok) {
        if (error) *error = toolcage__cstring(&err);
        tool_component_string_free(&err);
        return false;
    }
    *text = toolcage__cstring(&response.text);
    toolcage_tool_host_sampling_response_free(&response);
    return true;
}

/* A root the client shares (MCP `Root`): a folder the user works in. */
typedef struct toolcage_root {
    /* Its URI, usually `file:///...` (malloc'd). */
    char *uri;
    /* Its name (malloc'd), or NULL if the client gives none. */
    char *name;
} toolcage_root;

/* Free `count` roots from `toolcage_roots` or a reply, and the array. */
static inline void toolcage_roots_free(toolcage_root *roots, size_t count) {
    for (size_t i = 0; roots && i < count; i++) {
        free(roots[i].uri);
        free(roots[i].name);
    }
    free(roots);
}

/* The host's root list as malloc'd `toolcage_root`s (internal). */
static inline toolcage_root *toolcage__roots(const toolcage_tool_host_list_root_t *list, size_t *count) {
    *count = list->len;
    if (!list->len) return NULL;
    toolcage_root *roots = (toolcage_root *)toolcage__xmalloc(list->len * sizeof *roots);
    for (size_t i = 0; i < list->len; i++) {
        roots[i].uri = toolcage__cstring(&list->ptr[i].uri);
        roots[i].name = list->ptr[i].name.is_some ? toolcage__cstring(&list->ptr[i].name.val) : NULL;
    }
    return roots;
}

/*
 * The client's roots (MCP `roots/list`): the folders the user works in.
 * They say what the user is working on; they grant nothing (what the tool
 * can open is the operator's decision). On success `*roots` gets a malloc'd
 * array of `*count` roots (NULL when there are none; release it with
 * `toolcage_roots_free`). False when the client does not share its roots:
 * then `*error` (if not NULL) gets the host's message (malloc'd, free() it).
 */
static inline bool toolcage_roots(toolcage_root **roots, size_t *count, char **error) {
    *roots = NULL;
    *count = 0;
    if (error) *error = NULL;
    toolcage_tool_host_list_root_t list;
    tool_component_string_t err;
    if (!toolcage_tool_host_roots(&list, &err)) {
        if (error) *error = toolcage__cstring(&err);
        tool_component_string_free(&err);
        return false;
    }
    *roots = toolcage__roots(&list, count);
    toolcage_tool_host_list_root_free(&list);
    return true;
}

/* What a question of `toolcage_ask` asks for. */
typedef enum toolcage_question_kind {
    /* The user, as `toolcage_elicit` does: `message` and `schema`. */
    TOOLCAGE_ASK_ELICIT = TOOLCAGE_TOOL_HOST_QUESTION_ELICIT,
    /* The client's model, as `toolcage_sample` does: `prompt` and
       `max_tokens`. */
    TOOLCAGE_ASK_SAMPLE = TOOLCAGE_TOOL_HOST_QUESTION_SAMPLE,
    /* The client's roots, as `toolcage_roots` gives them. */
    TOOLCAGE_ASK_ROOTS = TOOLCAGE_TOOL_HOST_QUESTION_ROOTS,
} toolcage_question_kind;

/* One question of `toolcage_ask`. Fields its kind does not use are ignored. */
typedef struct toolcage_question {
    /* 1 to 64 characters from `A-Z a-z 0-9 _ - .`, unique within the call
       (`elicit-N`, `sample-N`, `roots-N` and `toolcage-...` are the
       host's). On 2026-07-28 the client sees it. */
    const char *key;
    toolcage_question_kind kind;
    /* TOOLCAGE_ASK_ELICIT: the question and a flat JSON object schema. */
    const char *message;
    const char *schema;
    /* TOOLCAGE_ASK_SAMPLE: the prompt and the most tokens to spend. */
    const char *prompt;
    uint32_t max_tokens;
} toolcage_question;

/*
 * The answer to one question of `toolcage_ask`. Every pointer is malloc'd
 * or NULL; `toolcage_reply_free` frees them all.
 */
typedef struct toolcage_reply {
    /* The host's message when the client could not answer this question
       (then nothing else is set), else NULL. */
    char *error;
    /* TOOLCAGE_ASK_ELICIT: ACCEPT, DECLINE or CANCEL (FAILED with `error`),
       and on ACCEPT the values, a JSON object. */
    toolcage_answer action;
    char *values;
    /* TOOLCAGE_ASK_SAMPLE: the completion's text. */
    char *text;
    /* TOOLCAGE_ASK_ROOTS: the roots. */
    toolcage_root *roots;
    size_t root_count;
} toolcage_reply;

/* Free what a reply holds (not the reply itself). */
static inline void toolcage_reply_free(toolcage_reply *reply) {
    free(reply->error);
    free(reply->values);
    free(reply->text);
    toolcage_roots_free(reply->roots, reply->root_count);
    memset(reply, 0, sizeof *reply);
}

/*
 * Ask `count` questions at once (at most 16), each under its own key: a
 * 2026-07-28 client answers all of them in one round, older ones one after
 * another. Fills `replies[0..count)`, in the order asked (release each with
 * `toolcage_reply_free`). A malformed list (a bad or repeated key, more than
 * 16 questions) ends the call with an error. Ask before acting, as for
 * `toolcage_elicit`.
 */
static inline void toolcage_ask(const toolcage_question *questions, size_t count,
                                toolcage_reply *replies) {
    toolcage_tool_host_list_keyed_question_t list;
    list.len = count;
    list.ptr = count ? (toolcage_tool_host_keyed_question_t *)toolcage__xmalloc(count * sizeof *list.ptr)
                     : NULL;
    for (size_t i = 0; i < count; i++) {
        const toolcage_question *q = &questions[i];
        toolcage_tool_host_keyed_question_t *k = &list.ptr[i];
        memset(k, 0, sizeof *k);
        toolcage__string(&k->key, q->key);
        k->question.tag = (uint8_t)q->kind;
        if (q->kind == TOOLCAGE_ASK_ELICIT) {
            toolcage__string(&k->question.val.elicit.message, q->message);
            toolcage__string(&k->question.val.elicit.requested_schema,
                             q->schema ? q->schema : "{\"type\":\"object\",\"properties\":{}}");
        } else if (q->kind == TOOLCAGE_ASK_SAMPLE) {
            toolcage_tool_host_sampling_request_t *r = &k->question.val.sample;
            r->messages.len = 1;
            r->messages.ptr = (toolcage_tool_host_sampling_message_t *)toolcage__xmalloc(sizeof *r->messages.ptr);
            r->messages.ptr[0].role = TOOLCAGE_TOOL_HOST_ROLE_USER;
            toolcage__string(&r->messages.ptr[0].text, q->prompt);
            r->max_tokens = q->max_tokens;
        }
    }
    toolcage_tool_host_list_result_answer_string_t answers;
    toolcage_tool_host_ask(&list, &answers);
    toolcage_tool_host_list_keyed_question_free(&list);
    for (size_t i = 0; i < count; i++) {
        toolcage_reply *reply = &replies[i];
        memset(reply, 0, sizeof *reply);
        reply->action = TOOLCAGE_ELICIT_FAILED;
        if (i >= answers.len) {
            reply->error = toolcage_printf("the host gave no answer to question `%s`", questions[i].key);
            continue;
        }
        toolcage_tool_host_result_answer_string_t *result = &answers.ptr[i];
        if (result->is_err) {
            reply->error = toolcage__cstring(&result->val.err);
            continue;
        }
        toolcage_tool_host_answer_t *answer = &result->val.ok;
        switch (answer->tag) {
        case TOOLCAGE_TOOL_HOST_ANSWER_ELICIT:
            reply->action = (toolcage_answer)answer->val.elicit.tag;
            if (reply->action == TOOLCAGE_ELICIT_ACCEPT)
                reply->values = toolcage__cstring(&answer->val.elicit.val.accept);
            break;
        case TOOLCAGE_TOOL_HOST_ANSWER_SAMPLE:
            reply->text = toolcage__cstring(&answer->val.sample.text);
            break;
        case TOOLCAGE_TOOL_HOST_ANSWER_ROOTS:
            reply->roots = toolcage__roots(&answer->val.roots, &reply->root_count);
            break;
        }
    }
    toolcage_tool_host_list_result_answer_string_free(&answers);
}

/*
 * `toolcage_elicit` under a key of your choosing (see `toolcage_ask`): the
 * key a 2026-07-28 client sees in its `inputRequests`. Same results and
 * ownership as `toolcage_elicit`.
 */
static inline toolcage_answer toolcage_elicit_as(const char *key, const char *message,
                                                 const char *requested_schema, char **values,
                                                 char **error) {
    toolcage_question question;
    memset(&question, 0, sizeof question);
    question.key = key;
    question.kind = TOOLCAGE_ASK_ELICIT;
    question.message = message;
    question.schema = requested_schema;
    toolcage_reply reply;
    toolcage_ask(&question, 1, &reply);
    toolcage_answer action = reply.action;
    if (values) { *values = reply.values; reply.values = NULL; }
    if (error) { *error = reply.error; reply.error = NULL; }
    toolcage_reply_free(&reply);
    return action;
}

/*
 * From here the call may take long: for a tool registered with
 * `.task_start = TOOLCAGE_TASK_START_ON_BEGIN_TASK`, a client that accepts
 * tasks gets its task now, and questions asked after this are the task's.
 * Anywhere else it does nothing.
 */
static inline void toolcage_begin_task(void) {
    toolcage_tool_host_begin_task();
}

/* ------------------------------------------------------------------------ */
/* The exports (used by TOOLCAGE_TOOLS)                                     */
/* ------------------------------------------------------------------------ */

/* Whether `c` separates two sizes of `toolcage_icon.sizes` (internal). */
static inline bool toolcage__size_sep(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == ',';
}

/* A space-separated size list as host strings (internal). */
static inline void toolcage__sizes(tool_component_list_string_t *out, const char *sizes) {
    out->ptr = NULL;
    out->len = 0;
    size_t n = 0;
    for (const char *p = sizes; p && *p;) {
        while (toolcage__size_sep(*p)) p++;
        if (!*p) break;
        n++;
        while (*p && !toolcage__size_sep(*p)) p++;
    }
    if (!n) return;
    out->ptr = (tool_component_string_t *)toolcage__xmalloc(n * sizeof *out->ptr);
    for (const char *p = sizes; *p;) {
        while (toolcage__size_sep(*p)) p++;
        if (!*p) break;
        const char *start = p;
        while (*p && !toolcage__size_sep(*p)) p++;
        toolcage__string_n(&out->ptr[out->len++], start, (size_t)(p - start));
    }
}

/* A tool's icons (ended by one whose `src` is NULL) as host icons (internal). */
static inline void toolcage__icons(toolcage_tool_types_list_icon_t *out, const toolcage_icon *icons) {
    size_t n = 0;
    while (icons && icons[n].src) n++;
    out->len = n;
    out->ptr = n ? (toolcage_tool_types_icon_t *)toolcage__xmalloc(n * sizeof *out->ptr) : NULL;
    for (size_t i = 0; i < n; i++) {
        toolcage_tool_types_icon_t *icon = &out->ptr[i];
        memset(icon, 0, sizeof *icon);
        toolcage__string(&icon->src, icons[i].src);
        toolcage__option_string(&icon->mime_type, icons[i].mime_type);
        toolcage__sizes(&icon->sizes, icons[i].sizes);
        icon->theme.is_some = icons[i].theme == TOOLCAGE_ICON_LIGHT || icons[i].theme == TOOLCAGE_ICON_DARK;
        icon->theme.val = icons[i].theme == TOOLCAGE_ICON_DARK ? TOOLCAGE_TOOL_TYPES_ICON_THEME_DARK
                                                               : TOOLCAGE_TOOL_TYPES_ICON_THEME_LIGHT;
    }
}

static inline void toolcage__describe(const toolcage_tool *tools, size_t count,
                                      exports_toolcage_tool_tool_list_descriptor_t *ret) {
    ret->len = count;
    ret->ptr = count ? (exports_toolcage_tool_tool_descriptor_t *)toolcage__xmalloc(count * sizeof *ret->ptr)
                     : NULL;
    for (size_t i = 0; i < count; i++) {
        const toolcage_tool *tool = &tools[i];
        exports_toolcage_tool_tool_descriptor_t *d = &ret->ptr[i];
        memset(d, 0, sizeof *d);
        toolcage__string(&d->name, tool->name);
        toolcage__option_string(&d->title, tool->title);
        toolcage__string(&d->description, tool->description);
        toolcage__string(&d->input_schema, tool->input_schema ? tool->input_schema : "{\"type\":\"object\"}");
        toolcage__option_string(&d->output_schema, tool->output_schema);
        d->annotations.read_only = tool->read_only;
        d->annotations.destructive = tool->destructive;
        d->annotations.idempotent = tool->idempotent;
        d->annotations.open_world = tool->open_world;
        toolcage__icons(&d->icons, tool->icons);
        d->task_support = (toolcage_tool_types_task_support_t)tool->task_support;
        d->task_start = (toolcage_tool_types_task_start_t)tool->task_start;
        /* Only the flags the contract defines: an unknown bit would trap. */
        d->needs = (toolcage_tool_types_client_needs_t)(tool->needs & TOOLCAGE__NEEDS_ALL);
    }
}

static inline void toolcage__call(const toolcage_tool *tools, size_t count,
                                  tool_component_string_t *name,
                                  tool_component_string_t *arguments,
                                  exports_toolcage_tool_tool_call_result_t *ret) {
    memset(ret, 0, sizeof *ret);
    const toolcage_tool *tool = NULL;
    for (size_t i = 0; i < count && !tool; i++) {
        const char *n = tools[i].name ? tools[i].name : "";
        if (strlen(n) == name->len && memcmp(n, name->ptr, name->len) == 0) tool = &tools[i];
    }
    /* The arguments of an export belong to the callee. */
    char *args = toolcage__cstring(arguments);
    tool_component_string_free(arguments);
    if (!tool || !tool->run) {
        char *n = toolcage__cstring(name);
        toolcage_error(ret, "this component has no tool `%s`", n);
        free(n);
    } else {
        tool->run(args, ret);
    }
    free(args);
    tool_component_string_free(name);
}

#ifdef __cplusplus
}
#endif

#endif /* TOOLCAGE_H */
