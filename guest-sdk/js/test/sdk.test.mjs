// The SDK's logic under Node, with a stub host:
//   cd guest-sdk/js && node --import ./test/register.mjs --test test/
import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  ask, askBatch, beginTask, component, confirm, elicit, elicitAs, image, info, log, progress, resource, roots, s, sample, text, tool,
  warn,
} from '../index.js';

const stub = globalThis.hostStub;

tool(
  {
    name: 'word_count',
    title: 'Word count',
    description: 'Count words.',
    input: s.object({ text: s.string({ minLength: 1 }), unique: s.optional(s.boolean()) }),
    output: s.object({ words: s.integer(), unique_words: s.optional(s.integer()) }),
    annotations: { readOnly: true, idempotent: true },
  },
  ({ text, unique }) => {
    const words = text.split(/\s+/).filter(Boolean);
    return unique ? { words: words.length, unique_words: new Set(words.map((w) => w.toLowerCase())).size } : { words: words.length };
  },
);
tool({ name: 'str', description: 'A string.' }, () => 'hello');
tool({ name: 'arr', description: 'An array.' }, () => [1, 2]);
tool({ name: 'num', description: 'A number.' }, () => 7);
tool({ name: 'nothing', description: 'Nothing.' }, () => undefined);
tool({ name: 'async_ok', description: 'Async.' }, async ({ n }) => ({ twice: n * 2 }));
tool({ name: 'async_fail', description: 'Async failure.' }, async () => {
  throw new Error('async boom');
});
tool({ name: 'throw_string', description: 'Throws a string.' }, () => {
  throw 'just a string';
});
tool({ name: 'throw_empty', description: 'Throws an empty Error.' }, () => {
  throw new TypeError();
});
tool({ name: 'mixed', description: 'Content items.' }, () => ({
  content: [text('a'), image(new Uint8Array([1, 2]), 'image/png'), resource('x://y', 'body', 'text/plain'), resource('x://z', [9])],
}));
tool({ name: 'result_error', description: 'isError without throwing.' }, () => ({ content: [text('nope')], isError: true }));
tool({ name: 'content_field', description: 'Structured with a content key.' }, () => ({ content: 'not items' }));
tool(
  { name: 'declared_string', description: 'Output schema, returns a string.', output: s.object({ a: s.string() }) },
  () => 'oops',
);
tool({ name: 'bigint', description: 'Unserialisable.' }, () => ({ n: 1n }));
tool({ name: 'oom', description: 'SpiderMonkey out of memory.' }, () => {
  throw 'out of memory';
});

const call = (name, args) => component.call(name, JSON.stringify(args));

test('describe lists the tools with JSON text schemas and annotations', () => {
  const [wc, str] = component.describe();
  assert.equal(wc.name, 'word_count');
  assert.equal(wc.title, 'Word count');
  assert.deepEqual(JSON.parse(wc.inputSchema), {
    type: 'object',
    properties: { text: { type: 'string', minLength: 1 }, unique: { type: 'boolean' } },
    required: ['text'],
    additionalProperties: false,
  });
  assert.deepEqual(JSON.parse(wc.outputSchema), {
    type: 'object',
    properties: { words: { type: 'integer' }, unique_words: { type: 'integer' } },
    required: ['words'],
    additionalProperties: false,
  });
  assert.deepEqual(wc.annotations, { readOnly: true, destructive: false, idempotent: true, openWorld: false });
  assert.equal(str.title, undefined);
  assert.equal(str.outputSchema, undefined);
  assert.deepEqual(JSON.parse(str.inputSchema), { type: 'object', properties: {} });
  // The 0.2.0 fields, at their defaults.
  assert.deepEqual(str.icons, []);
  assert.equal(str.taskSupport, 'forbidden');
  assert.equal(str.taskStart, 'with-call');
  assert.deepEqual(str.needs, { sampling: false, elicitation: false, roots: false });
});

test('icons, task support and client needs reach the descriptor as WIT values', () => {
  tool(
    {
      name: 'decorated',
      description: 'Has everything 0.2.0 adds.',
      icons: [{ src: 'https://example.com/d.png', mimeType: 'image/png', sizes: ['48x48'], theme: 'dark' }, { src: 'data:image/svg+xml;base64,PHN2Zy8+' }],
      taskSupport: 'optional',
      taskStart: 'on-begin-task',
      needs: ['elicitation', 'roots'],
    },
    () => 'ok',
  );
  const d = component.describe().find((t) => t.name === 'decorated');
  assert.deepEqual(d.icons, [
    { src: 'https://example.com/d.png', mimeType: 'image/png', sizes: ['48x48'], theme: 'dark' },
    { src: 'data:image/svg+xml;base64,PHN2Zy8+', mimeType: undefined, sizes: [], theme: undefined },
  ]);
  assert.equal(d.taskSupport, 'optional');
  assert.equal(d.taskStart, 'on-begin-task');
  assert.deepEqual(d.needs, { sampling: false, elicitation: true, roots: true });
  assert.throws(() => tool({ name: 'y1', description: 'x', taskSupport: 'sometimes' }, () => 1), /`taskSupport` is "sometimes"/);
  assert.throws(() => tool({ name: 'y2', description: 'x', taskStart: 'onBeginTask' }, () => 1), /`taskStart`/);
  assert.throws(() => tool({ name: 'y3', description: 'x', needs: ['telepathy'] }, () => 1), /`needs` is "telepathy"/);
  assert.throws(() => tool({ name: 'y4', description: 'x', needs: 'roots' }, () => 1), /must be an array/);
  assert.throws(() => tool({ name: 'y5', description: 'x', icons: [{ url: 'https://x' }] }, () => 1), /unknown field `url`/);
  assert.throws(() => tool({ name: 'y6', description: 'x', icons: [{ src: 'https://x', theme: 'blue' }] }, () => 1), /`theme`/);
});

test('an object is structured output plus the same JSON as text', () => {
  const result = call('word_count', { text: 'a b A', unique: true });
  assert.deepEqual(result, {
    content: [{ tag: 'text', val: '{"words":3,"unique_words":2}' }],
    structured: '{"words":3,"unique_words":2}',
    isError: false,
  });
});

test('a string is one text item; other values are wrapped as {result}', () => {
  assert.deepEqual(call('str', {}), { content: [{ tag: 'text', val: 'hello' }], structured: undefined, isError: false });
  assert.equal(call('arr', {}).structured, '{"result":[1,2]}');
  assert.equal(call('num', {}).structured, '{"result":7}');
  assert.deepEqual(call('nothing', {}), { content: [], structured: undefined, isError: false });
});

test('async handlers resolve, and rejections become error results', async () => {
  assert.equal((await call('async_ok', { n: 21 })).structured, '{"twice":42}');
  assert.deepEqual(await call('async_fail', {}), { content: [{ tag: 'text', val: 'async boom' }], structured: undefined, isError: true });
});

test('a thrown value becomes an error result with its message', () => {
  assert.equal(call('throw_string', {}).content[0].val, 'just a string');
  assert.equal(call('throw_empty', {}).content[0].val, 'TypeError');
  assert.equal(call('bigint', {}).isError, true);
  assert.match(call('bigint', {}).content[0].val, /could not be serialised/);
});

test('running out of memory is not caught: the call ends and the host names the limit', () => {
  assert.throws(() => call('oom', {}), (e) => e === 'out of memory');
});

test('content helpers map to the WIT variants', () => {
  const { content, structured, isError } = call('mixed', {});
  assert.equal(isError, false);
  assert.equal(structured, undefined);
  assert.deepEqual(content[0], { tag: 'text', val: 'a' });
  assert.equal(content[1].tag, 'image');
  assert.deepEqual([...content[1].val.data], [1, 2]);
  assert.equal(content[1].val.mimeType, 'image/png');
  assert.deepEqual(content[2], { tag: 'embedded', val: { uri: 'x://y', mimeType: 'text/plain', body: { tag: 'text', val: 'body' } } });
  assert.equal(content[3].val.body.tag, 'blob');
  assert.equal(content[3].val.mimeType, undefined);
  assert.equal(call('result_error', {}).isError, true);
  // Not content items: structured output.
  assert.equal(call('content_field', {}).structured, '{"content":"not items"}');
});

test('an output schema needs an object', () => {
  const result = call('declared_string', {});
  assert.equal(result.isError, true);
  assert.match(result.content[0].val, /declares an output schema/);
});

test('unknown tools and bad arguments are error results', () => {
  assert.deepEqual(component.call('nope', '{}'), { content: [{ tag: 'text', val: 'this component has no tool `nope`' }], structured: undefined, isError: true });
  assert.equal(component.call('str', '[1]').isError, true);
  assert.equal(component.call('str', 'null').isError, true);
  assert.match(component.call('str', '{').content[0].val, /not valid JSON/);
});

test('registration refuses bad definitions', () => {
  assert.throws(() => tool({ name: 'bad name', description: 'x' }, () => 1), /must be 1 to 128 characters/);
  assert.throws(() => tool({ name: 'str', description: 'x' }, () => 1), /registered twice/);
  assert.throws(() => tool({ name: 'x1', description: 'x', annotations: { readonly: true } }, () => 1), /unknown annotation `readonly`/);
  assert.throws(() => tool({ name: 'x2', description: 'x', input: s.string() }, () => 1), /object schema/);
  assert.throws(() => tool({ name: 'x3', description: 'x', inputs: {} }, () => 1), /unknown field `inputs`/);
  assert.throws(() => tool({ name: 'x4', description: '' }, () => 1), /description/);
  assert.throws(() => s.object({ a: s.string() }, { required: ['b'] }), /not among the properties/);
});

test('builders', () => {
  assert.deepEqual(s.object({ a: s.string(), b: s.optional(s.integer()) }, { required: ['b'], additionalProperties: true }), {
    type: 'object',
    properties: { a: { type: 'string' }, b: { type: 'integer' } },
    required: ['b'],
    additionalProperties: true,
  });
  assert.deepEqual(s.object({}), { type: 'object', properties: {}, additionalProperties: false });
  assert.deepEqual(s.array(s.number(), { minItems: 1 }), { type: 'array', items: { type: 'number' }, minItems: 1 });
  assert.deepEqual(s.enum(['a', 'b']), { type: 'string', enum: ['a', 'b'] });
  assert.deepEqual(s.literal(3), { type: 'number', const: 3 });
  assert.deepEqual(s.string({ enum: ['x'], description: 'd' }), { type: 'string', enum: ['x'], description: 'd' });
  assert.equal(JSON.stringify(s.optional(s.boolean())), '{"type":"boolean"}');
});

test('log and progress reach the host', () => {
  stub.calls.length = 0;
  log('info', 'one');
  warn('two');
  log('warn', 'three');
  info(4);
  progress(1, 3, 'step 1');
  progress(2);
  assert.deepEqual(stub.calls, [
    ['log', 'info', 'one'],
    ['log', 'warning', 'two'],
    ['log', 'warning', 'three'],
    ['log', 'info', '4'],
    ['progress', 1, 3, 'step 1'],
    ['progress', 2, undefined, undefined],
  ]);
  assert.throws(() => log('loud', 'x'), /unknown level/);
});

test('elicit, confirm and ask', () => {
  stub.calls.length = 0;
  stub.elicit = { tag: 'accept', val: '{"n":1}' };
  assert.deepEqual(elicit('q?', s.object({ n: s.integer() })), { action: 'accept', content: { n: 1 } });
  assert.equal(confirm('sure?'), true);
  assert.deepEqual(stub.calls[1], ['elicit', 'sure?', '{"type":"object","properties":{}}']);
  assert.deepEqual(ask('n?', s.object({ n: s.integer({ description: 'N' }) }, { title: 'dropped' })), { n: 1 });
  assert.deepEqual(stub.calls[2], ['elicit', 'n?', '{"type":"object","properties":{"n":{"type":"integer","description":"N"}},"required":["n"]}']);
  stub.elicit = { tag: 'decline' };
  assert.equal(confirm('sure?'), false);
  assert.equal(ask('n?', s.object({ n: s.integer() })), undefined);
  assert.deepEqual(elicit('q?', {}), { action: 'decline' });
  stub.elicit = { tag: 'cancel' };
  assert.deepEqual(elicit('q?', {}), { action: 'cancel' });
  stub.elicit = 'elicitation is not available here (no client)';
  assert.throws(() => confirm('sure?'), (e) => e instanceof Error && e.message === 'elicitation is not available here (no client)');
});

test('sample', () => {
  stub.calls.length = 0;
  stub.sample = { text: 'four', model: 'm', stopReason: undefined };
  assert.equal(sample('2+2?', 10), 'four');
  assert.deepEqual(stub.calls[0], ['sample', { messages: [{ role: 'user', text: '2+2?' }], systemPrompt: undefined, maxTokens: 10, temperature: undefined }]);
  stub.sample = 'this tool may not sample';
  assert.throws(() => sample('x', 10), /this tool may not sample/);
  assert.throws(() => sample('x', 0), /maxTokens/);
});

test('roots', () => {
  stub.calls.length = 0;
  stub.roots = [{ uri: 'file:///work', name: 'work' }, { uri: 'file:///tmp', name: undefined }];
  assert.deepEqual(roots(), [{ uri: 'file:///work', name: 'work' }, { uri: 'file:///tmp', name: undefined }]);
  stub.roots = 'the client does not share its roots';
  assert.throws(() => roots(), (e) => e instanceof Error && e.message === 'the client does not share its roots');
});

test('askBatch sends keyed questions and maps each answer', () => {
  stub.calls.length = 0;
  stub.ask = () => [
    { tag: 'ok', val: { tag: 'elicit', val: { tag: 'accept', val: '{"name":"Ada"}' } } },
    { tag: 'ok', val: { tag: 'sample', val: { text: 'hi', model: 'm', stopReason: 'endTurn' } } },
    { tag: 'ok', val: { tag: 'roots', val: [{ uri: 'file:///a', name: undefined }] } },
    { tag: 'err', val: 'the client cannot sample' },
  ];
  const answers = askBatch([
    { key: 'who', type: 'elicit', message: 'Name?', schema: s.object({ name: s.string() }) },
    { key: 'say', type: 'sample', messages: [{ role: 'user', text: 'hello' }], maxTokens: 5 },
    { key: 'where', type: 'roots' },
    { key: 'again', type: 'sample', messages: [], maxTokens: 1 },
  ]);
  assert.deepEqual(answers, [
    { key: 'who', type: 'elicit', action: 'accept', content: { name: 'Ada' } },
    { key: 'say', type: 'sample', text: 'hi', model: 'm', stopReason: 'endTurn' },
    { key: 'where', type: 'roots', roots: [{ uri: 'file:///a', name: undefined }] },
    { key: 'again', type: 'error', message: 'the client cannot sample' },
  ]);
  const [, questions] = stub.calls[0];
  assert.deepEqual(questions[0], {
    key: 'who',
    question: { tag: 'elicit', val: { message: 'Name?', requestedSchema: '{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}' } },
  });
  assert.deepEqual(questions[1].question, { tag: 'sample', val: { messages: [{ role: 'user', text: 'hello' }], systemPrompt: undefined, maxTokens: 5, temperature: undefined } });
  assert.deepEqual(questions[2], { key: 'where', question: { tag: 'roots' } });
  assert.throws(() => askBatch([{ key: 'bad key', type: 'roots' }]), /1 to 64 characters/);
  assert.throws(() => askBatch([{ key: 'k', type: 'telepathy' }]), /expected 'elicit', 'sample' or 'roots'/);
  assert.throws(() => askBatch([{ key: 'k', type: 'roots', message: 'x' }]), /unknown field `message`/);
});

test('elicitAs asks one keyed question', () => {
  stub.calls.length = 0;
  stub.ask = () => [{ tag: 'ok', val: { tag: 'elicit', val: { tag: 'decline' } } }];
  assert.deepEqual(elicitAs('confirm_delete', 'Delete?', {}), { action: 'decline' });
  assert.equal(stub.calls[0][1][0].key, 'confirm_delete');
  stub.ask = () => [{ tag: 'err', val: 'the client cannot elicit' }];
  assert.throws(() => elicitAs('confirm_delete', 'Delete?', {}), /the client cannot elicit/);
});

test('beginTask reaches the host', () => {
  stub.calls.length = 0;
  beginTask();
  assert.deepEqual(stub.calls, [['beginTask']]);
});

test('a host error thrown in a handler is the result text', () => {
  stub.elicit = '`toolcage call` cannot answer a tool\'s questions';
  tool({ name: 'asks', description: 'Asks.' }, () => (confirm('ok?') ? 'yes' : 'no'));
  assert.deepEqual(call('asks', {}).content, [{ tag: 'text', val: '`toolcage call` cannot answer a tool\'s questions' }]);
});
