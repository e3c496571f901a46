// Compile-time checks of index.d.ts (`tsc --noEmit` in the test suite):
// what the types accept, and with `@ts-expect-error`, what they refuse.
// Nothing here runs.

import { askBatch, elicitAs, roots, s, tool, text, type Answer, type Infer } from '../index.js';

const input = s.object({
  name: s.string({ minLength: 1 }),
  count: s.optional(s.integer()),
  tags: s.array(s.string()),
  mode: s.enum(['fast', 'slow']),
});
type Input = Infer<typeof input>;

const args: Input = { name: 'a', tags: [], mode: 'fast' };
const withCount: Input = { name: 'a', count: 2, tags: ['x'], mode: 'slow' };
// @ts-expect-error `name` is required
const missing: Input = { tags: [], mode: 'fast' };
// @ts-expect-error `mode` is one of the enum's values
const badMode: Input = { name: 'a', tags: [], mode: 'medium' };
// @ts-expect-error `count` is an integer (a number), not a string
const badCount: Input = { name: 'a', count: '2', tags: [], mode: 'fast' };

tool(
  {
    name: 'typed',
    description: 'A typed tool.',
    input,
    output: s.object({ message: s.string() }),
    annotations: { readOnly: true },
  },
  ({ name, count, tags, mode }) => {
    const n: string = name;
    const c: number | undefined = count;
    const t: string[] = tags;
    const m: 'fast' | 'slow' = mode;
    return { message: `${n} ${c ?? 0} ${t.length} ${m}` };
  },
);

tool({ name: 'async_text', description: 'Async, free-form content.', input }, async () => ({
  content: [text('hi')],
}));

tool(
  { name: 'wrong_output', description: 'Returns the wrong shape.', input, output: s.object({ message: s.string() }) },
  // @ts-expect-error the output schema says `message` is a string
  () => ({ message: 42 }),
);

tool(
  // @ts-expect-error annotations are booleans
  { name: 'bad_annotation', description: 'x', input, annotations: { readOnly: 'yes' } },
  () => 'ok',
);

tool(
  {
    name: 'decorated',
    description: 'Icons, tasks and needs.',
    icons: [{ src: 'https://example.com/i.png', mimeType: 'image/png', sizes: ['48x48'], theme: 'dark' }],
    taskSupport: 'optional',
    taskStart: 'on-begin-task',
    needs: ['elicitation', 'roots'],
  },
  () => 'ok',
);

// @ts-expect-error task support is `forbidden`, `optional` or `required`
tool({ name: 'bad_task', description: 'x', taskSupport: 'sometimes' }, () => 'ok');
// @ts-expect-error needs are capability names
tool({ name: 'bad_needs', description: 'x', needs: ['telepathy'] }, () => 'ok');
// @ts-expect-error an icon's theme is `light` or `dark`
tool({ name: 'bad_icon', description: 'x', icons: [{ src: 'https://x', theme: 'blue' }] }, () => 'ok');

const answers: Answer[] = askBatch([
  { key: 'who', type: 'elicit', message: 'Name?', schema: s.object({ name: s.string() }) },
  { key: 'say', type: 'sample', messages: [{ role: 'user', text: 'hi' }], maxTokens: 10 },
  { key: 'where', type: 'roots' },
]);
for (const answer of answers) {
  if (answer.type === 'roots') {
    const uris: string[] = answer.roots.map((root) => root.uri);
    void uris;
  } else if (answer.type === 'error') {
    const message: string = answer.message;
    void message;
  }
}
// @ts-expect-error a sampling question needs `maxTokens`
askBatch([{ key: 'say', type: 'sample', messages: [] }]);
const named = elicitAs('who', 'Name?', s.object({ name: s.string() }));
if (named.action === 'accept') {
  const name: string = named.content.name;
  void name;
}
const firstRoot: string | undefined = roots()[0]?.name;

void [args, withCount, missing, badMode, badCount, firstRoot];
