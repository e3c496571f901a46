// The SDK example tools in JavaScript (the same six in every language's
// example): structured output, an exception, logs and progress, a
// confirmation, and two that hit the limits; and `where`, which shows what
// contract 0.2.0 added (an icon, task support, a client need, the client's
// roots, a keyed question), as the Python and C examples do. Test-only.
//
// Built by tests/components/build-sdk-js, which lays this file next to a
// copy of guest-sdk/js as ./toolcage/ (the layout of `toolcage new --lang js`).
// @ts-check

import { askBatch, confirm, info, progress, roots, s, tool } from './toolcage/index.js';

tool(
  {
    name: 'word_count',
    description: 'Count the words in a text.',
    input: s.object({
      text: s.string({ description: 'The text to count the words of.', minLength: 1 }),
      unique: s.optional(s.boolean({ description: 'Also count distinct words, ignoring case.' })),
    }),
    output: s.object({
      words: s.integer({ description: 'How many words the text has.' }),
      unique_words: s.optional(s.integer({ description: 'How many distinct words, ignoring case.' })),
    }),
    annotations: { readOnly: true, idempotent: true },
  },
  ({ text, unique }) => {
    const words = text.split(/\s+/).filter((word) => word.length > 0);
    if (!unique) return { words: words.length };
    return { words: words.length, unique_words: new Set(words.map((word) => word.toLowerCase())).size };
  },
);

tool(
  {
    name: 'fail',
    description: 'Fail with the given message.',
    input: s.object({ message: s.string({ description: 'What the error says.' }) }),
  },
  ({ message }) => {
    throw new Error(message);
  },
);

tool(
  {
    name: 'chatty',
    description: 'Log each step and report progress.',
    input: s.object({ steps: s.integer({ description: 'How many steps to take.', minimum: 1, maximum: 10 }) }),
  },
  ({ steps }) => {
    for (let i = 1; i <= steps; i++) {
      info(`step ${i}`);
      progress(i, steps, `step ${i}`);
    }
    return `done after ${steps} steps`;
  },
);

tool(
  {
    name: 'archive',
    description: 'Archive something, once the user confirms.',
    input: s.object({ name: s.string({ description: 'What to archive.' }) }),
  },
  ({ name }) => {
    if (!confirm(`Archive ${name}?`)) throw new Error('not archived: the user said no');
    return `archived ${name}`;
  },
);

tool({ name: 'spin', description: 'Loop forever (for the limits).', input: s.object({}) }, () => {
  let n = 0;
  for (;;) n++;
});

tool(
  {
    name: 'hog',
    description: 'Allocate and touch memory.',
    input: s.object({ mib: s.integer({ description: 'How many MiB.' }) }),
  },
  ({ mib }) => {
    const blocks = [];
    for (let i = 0; i < mib; i++) {
      const block = new Uint8Array(1024 * 1024);
      for (let j = 0; j < block.length; j += 4096) block[j] = 1;
      blocks.push(block);
    }
    return `allocated ${mib} MiB`;
  },
);

tool(
  {
    name: 'where',
    description: "List the folders the user works in (the client's roots), one URI a line.",
    input: s.object({ key: s.optional(s.string({ description: 'Ask for them as a question under this key instead.' })) }),
    icons: [{ src: 'data:image/svg+xml;base64,PHN2Zy8+', mimeType: 'image/svg+xml', sizes: ['any'] }],
    taskSupport: 'optional',
    needs: ['roots'],
  },
  ({ key }) => {
    let shared;
    if (key === undefined) {
      shared = roots();
    } else {
      const [answer] = askBatch([{ key, type: 'roots' }]);
      if (answer.type === 'error') throw new Error(answer.message);
      if (answer.type !== 'roots') throw new Error(`asked for roots, got ${answer.type}`);
      shared = answer.roots;
    }
    return shared.map((root) => root.uri).join('\n') || 'no roots';
  },
);

export { component as tool } from './toolcage/index.js';
