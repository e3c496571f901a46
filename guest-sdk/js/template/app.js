// The `{{name}}` tool: a toolcage tool in JavaScript.
//
// Edit the tool below (its `input` schema is what the model must send, its
// `output` schema what it gets back), then build with `./build.sh`.
// toolcage/ is the SDK; its README says what else it offers (logging,
// progress, asking the user, content items).
// @ts-check

import { s, tool } from './toolcage/index.js';

tool(
  {
    name: '{{name}}',
    description: 'Greet someone by name. Returns the greeting.',
    input: s.object({
      name: s.string({ description: 'Who to greet.' }),
    }),
    output: s.object({
      message: s.string({ description: 'The greeting.' }),
    }),
    annotations: { readOnly: true, idempotent: true },
  },
  ({ name }) => {
    if (name.trim() === '') throw new Error('`name` must not be empty');
    return { message: `Hello, ${name}!` };
  },
);

// The component's export: componentize-js looks for `tool` in this module.
export { component as tool } from './toolcage/index.js';
