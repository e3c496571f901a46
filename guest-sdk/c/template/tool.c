// The `{{name}}` tool: a toolcage tool in C.
//
// Edit the function below and its entry in TOOLCAGE_TOOLS (name,
// description, input and output schemas), then build with `./build.sh`.
// toolcage/toolcage.h documents every helper.
#include <stdlib.h>
#include <string.h>

#include "toolcage.h"

static void {{name}}(const char *args, toolcage_result *result) {
    char *name;
    if (!toolcage_arg_string(args, "name", &name)) {
        toolcage_error(result, "`name` must be a string");
        return;
    }
    if (strspn(name, " \t\n\r") == strlen(name)) {
        toolcage_error(result, "`name` must not be empty");
    } else {
        // Structured output is JSON text (toolcage_json_quote makes a JSON
        // string of any text); the helper also adds it as the result's text.
        char *message = toolcage_printf("Hello, %s!", name);
        char *quoted = toolcage_json_quote(message);
        toolcage_structuredf(result, "{\"message\":%s}", quoted);
        free(quoted);
        free(message);
    }
    free(name);
}

TOOLCAGE_TOOLS(
    {
        .name = "{{name}}",
        .description = "Greet someone by name.",
        .input_schema = TOOLCAGE_JSON({
            "type": "object",
            "properties": {"name": {"type": "string", "description": "Who to greet."}},
            "required": ["name"]
        }),
        .output_schema = TOOLCAGE_JSON({
            "type": "object",
            "properties": {"message": {"type": "string"}},
            "required": ["message"]
        }),
        .read_only = true,
        .idempotent = true,
        .run = {{name}},
    },
);
