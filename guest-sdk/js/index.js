// @toolcage/tool: write toolcage tools in JavaScript.
//
// A tool is a handler function plus a name, a description and a JSON Schema
// for its arguments. `tool(...)` registers one; `component` implements the
// `toolcage:tool/tool` interface of the WIT world `tool-component`
// (guest-sdk/wit/tool.wit) for every registered tool. An app module ends with
//
//     export { component as tool } from './toolcage/index.js';
//
// and is built with componentize-js against that world. No dependencies:
// this file is the whole runtime.
//
// The world is `tool-component` of `toolcage:tool@0.2.0`: tools only. The
// `resources`, `prompts` and `completions` exports of `full-component` are
// not offered here (completions complete prompt and template arguments, so
// they come with those).

import * as host from 'toolcage:tool/host@0.2.0';

// ---------------------------------------------------------------------------
// Schemas

const OPTIONAL = Symbol('toolcage.optional');

function schemaOf(type, options) {
  return { type, ...(options ?? {}) };
}

function isOptional(schema) {
  return schema !== null && typeof schema === 'object' && schema[OPTIONAL] === true;
}

/** Builders of JSON Schema objects, typed so that `Infer` can read them. */
export const s = Object.freeze({
  /**
   * An object schema. Every property is required unless wrapped in
   * `s.optional`, or unless `options.required` lists the required ones.
   * Properties not listed are refused unless `additionalProperties: true`.
   */
  object(properties, options = {}) {
    const { required, ...rest } = options;
    const props = {};
    const needed = [];
    for (const [key, value] of Object.entries(properties ?? {})) {
      if (value === null || typeof value !== 'object') {
        throw new TypeError(`s.object: property \`${key}\` is not a schema`);
      }
      props[key] = { ...value };
      if (!isOptional(value)) needed.push(key);
    }
    const list = required === undefined ? needed : [...required];
    for (const key of list) {
      if (!(key in props)) {
        throw new TypeError(`s.object: required property \`${key}\` is not among the properties`);
      }
    }
    const schema = { type: 'object', properties: props };
    if (list.length > 0) schema.required = list;
    return { ...schema, additionalProperties: false, ...rest };
  },
  string: (options) => schemaOf('string', options),
  integer: (options) => schemaOf('integer', options),
  number: (options) => schemaOf('number', options),
  boolean: (options) => schemaOf('boolean', options),
  array: (items, options) => ({ type: 'array', items, ...(options ?? {}) }),
  /** Mark a property of `s.object` as not required. */
  optional(schema) {
    const copy = { ...schema };
    Object.defineProperty(copy, OPTIONAL, { value: true, enumerable: false });
    return copy;
  },
  /** Exactly this value (`const`). */
  literal(value, options) {
    const type = value === null ? 'null' : typeof value;
    return { type, const: value, ...(options ?? {}) };
  },
  /** One of these strings. */
  enum: (values, options) => ({ type: 'string', enum: [...values], ...(options ?? {}) }),
});

// ---------------------------------------------------------------------------
// Content helpers

/** A text content item. */
export function text(value) {
  return { type: 'text', text: String(value) };
}

/** An image content item: `data` is the bytes (Uint8Array), `mimeType` e.g. `image/png`. */
export function image(data, mimeType) {
  return { type: 'image', data: bytes(data, 'image'), mimeType: String(mimeType) };
}

/** An audio content item: `data` is the bytes (Uint8Array), `mimeType` e.g. `audio/wav`. */
export function audio(data, mimeType) {
  return { type: 'audio', data: bytes(data, 'audio'), mimeType: String(mimeType) };
}

/**
 * An embedded resource: `body` is a string (a text resource) or bytes (a
 * blob).
 */
export function resource(uri, body, mimeType) {
  const item = { uri: String(uri) };
  if (mimeType !== undefined) item.mimeType = String(mimeType);
  if (typeof body === 'string') item.text = body;
  else item.blob = bytes(body, 'resource');
  return { type: 'resource', resource: item };
}

function bytes(data, what) {
  if (data instanceof Uint8Array) return data;
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  if (Array.isArray(data)) return Uint8Array.from(data);
  throw new TypeError(`${what} data must be bytes (a Uint8Array, an ArrayBuffer or an array of numbers)`);
}

// ---------------------------------------------------------------------------
// Registration

const NAME = /^[A-Za-z0-9_.-]{1,128}$/;
const ANNOTATIONS = ['readOnly', 'destructive', 'idempotent', 'openWorld'];
const FIELDS = ['name', 'title', 'description', 'input', 'output', 'annotations', 'icons', 'taskSupport', 'taskStart', 'needs'];
const TASK_SUPPORT = ['forbidden', 'optional', 'required'];
const TASK_START = ['with-call', 'on-begin-task'];
const NEEDS = ['sampling', 'elicitation', 'roots'];
const ICON_KEYS = ['src', 'mimeType', 'sizes', 'theme'];
const ICON_THEMES = ['light', 'dark'];
const registry = new Map();

function objectSchema(schema, what, name) {
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema) || schema.type !== 'object') {
    throw new TypeError(`tool \`${name}\`: \`${what}\` must be an object schema ({type: 'object', ...})`);
  }
  return JSON.stringify(schema);
}

function oneOf(value, allowed, what, name) {
  if (!allowed.includes(value)) {
    throw new TypeError(`tool \`${name}\`: \`${what}\` is ${JSON.stringify(value)} (expected one of ${allowed.map((a) => `'${a}'`).join(', ')})`);
  }
  return value;
}

// The icons as the WIT `icon` records. The host checks what the SDK cannot
// (an `https:` or `data:image/` source, the size limits, at most 8 listed).
function iconsOf(icons, name) {
  if (!Array.isArray(icons)) throw new TypeError(`tool \`${name}\`: \`icons\` must be an array of icons ({src, mimeType?, sizes?, theme?})`);
  return icons.map((icon, i) => {
    const what = `tool \`${name}\`: icon ${i}`;
    if (icon === null || typeof icon !== 'object') throw new TypeError(`${what} must be an object ({src, mimeType?, sizes?, theme?})`);
    const extra = Object.keys(icon).find((key) => !ICON_KEYS.includes(key));
    if (extra !== undefined) throw new TypeError(`${what}: unknown field \`${extra}\` (expected ${ICON_KEYS.join(', ')})`);
    const { src, mimeType, sizes = [], theme } = icon;
    if (typeof src !== 'string' || src === '') throw new TypeError(`${what}: \`src\` must be an https: URL or a data:image/ URI`);
    if (mimeType !== undefined && typeof mimeType !== 'string') throw new TypeError(`${what}: \`mimeType\` must be a string`);
    if (!Array.isArray(sizes) || !sizes.every((size) => typeof size === 'string')) {
      throw new TypeError(`${what}: \`sizes\` must be an array of strings ('48x48', 'any')`);
    }
    if (theme !== undefined && !ICON_THEMES.includes(theme)) throw new TypeError(`${what}: \`theme\` must be 'light' or 'dark'`);
    return Object.freeze({ src, mimeType, sizes: Object.freeze([...sizes]), theme });
  });
}

// `needs`, a list of capability names, as the WIT `client-needs` flags (an
// object of booleans).
function needsOf(needs, name) {
  if (!Array.isArray(needs)) throw new TypeError(`tool \`${name}\`: \`needs\` must be an array of ${NEEDS.map((n) => `'${n}'`).join(', ')}`);
  for (const need of needs) oneOf(need, NEEDS, 'needs', name);
  return Object.freeze([...new Set(needs)]);
}

/**
 * Register a tool. `handler(args)` gets the arguments object (already
 * checked by the host against `input`) and returns the result, or a Promise
 * of it. Returns the tool's definition.
 */
export function tool(definition, handler) {
  if (definition === null || typeof definition !== 'object') {
    throw new TypeError('tool: the first argument must be the definition object');
  }
  const {
    name,
    title,
    description,
    input,
    output,
    annotations = {},
    icons = [],
    taskSupport = 'forbidden',
    taskStart = 'with-call',
    needs = [],
  } = definition;
  if (typeof name !== 'string' || !NAME.test(name)) {
    throw new TypeError(`tool: the name ${JSON.stringify(name)} must be 1 to 128 characters from A-Z a-z 0-9 _ - .`);
  }
  const extra = Object.keys(definition).find((key) => !FIELDS.includes(key));
  if (extra !== undefined) {
    throw new TypeError(`tool \`${name}\`: unknown field \`${extra}\` (expected ${FIELDS.join(', ')})`);
  }
  if (registry.has(name)) throw new TypeError(`tool \`${name}\` is registered twice`);
  if (typeof description !== 'string' || description.length === 0) {
    throw new TypeError(`tool \`${name}\`: \`description\` must be a non-empty string`);
  }
  if (title !== undefined && typeof title !== 'string') {
    throw new TypeError(`tool \`${name}\`: \`title\` must be a string`);
  }
  if (typeof handler !== 'function') throw new TypeError(`tool \`${name}\`: the handler must be a function`);
  const flags = {};
  for (const [key, value] of Object.entries(annotations)) {
    if (!ANNOTATIONS.includes(key)) {
      throw new TypeError(`tool \`${name}\`: unknown annotation \`${key}\` (expected ${ANNOTATIONS.join(', ')})`);
    }
    if (typeof value !== 'boolean') throw new TypeError(`tool \`${name}\`: annotation \`${key}\` must be a boolean`);
  }
  for (const key of ANNOTATIONS) flags[key] = annotations[key] === true;
  const def = Object.freeze({
    name,
    title,
    description,
    input: input ?? { type: 'object', properties: {} },
    output,
    annotations: Object.freeze(flags),
    icons: Object.freeze(iconsOf(icons, name)),
    taskSupport: oneOf(taskSupport, TASK_SUPPORT, 'taskSupport', name),
    taskStart: oneOf(taskStart, TASK_START, 'taskStart', name),
    needs: needsOf(needs, name),
    handler,
  });
  const inputSchema = objectSchema(def.input, 'input', name);
  const outputSchema = output === undefined ? undefined : objectSchema(output, 'output', name);
  registry.set(name, { def, inputSchema, outputSchema });
  return def;
}

// ---------------------------------------------------------------------------
// The WIT export

function describe() {
  return [...registry.values()].map(({ def, inputSchema, outputSchema }) => ({
    name: def.name,
    title: def.title,
    description: def.description,
    inputSchema,
    outputSchema,
    annotations: { ...def.annotations },
    icons: def.icons.map((icon) => ({ ...icon, sizes: [...icon.sizes] })),
    taskSupport: def.taskSupport,
    taskStart: def.taskStart,
    needs: Object.fromEntries(NEEDS.map((need) => [need, def.needs.includes(need)])),
  }));
}

function errorResult(message) {
  return { content: [{ tag: 'text', val: message }], structured: undefined, isError: true };
}

function messageOf(error) {
  // Errors may come from another realm (the bindings'), so no `instanceof`.
  if (error !== null && typeof error === 'object' && typeof error.message === 'string' && error.message !== '') {
    return error.message;
  }
  try {
    return String(error);
  } catch {
    return 'the tool failed';
  }
}

// SpiderMonkey throws this (a string) when an allocation fails, as when the
// call's memory limit refuses to grow. Let it end the call: the runtime
// aborts and toolcage reports the limit, as it does for other languages.
function isOutOfMemory(error) {
  return error === 'out of memory' || (error !== null && typeof error === 'object' && error.name === 'InternalError' && error.message === 'out of memory');
}

function failed(name, error) {
  if (isOutOfMemory(error)) throw error;
  const message = messageOf(error);
  const stack = error !== null && typeof error === 'object' && typeof error.stack === 'string' ? error.stack : '';
  // Standard error goes to toolcage's log, never to the model.
  console.error(`tool \`${name}\` failed: ${message}${stack ? `\n${stack}` : ''}`);
  return errorResult(message);
}

function call(name, argumentsJson) {
  const entry = registry.get(name);
  if (entry === undefined) return errorResult(`this component has no tool \`${name}\``);
  let args;
  try {
    args = JSON.parse(argumentsJson);
  } catch (error) {
    return errorResult(`the arguments are not valid JSON: ${messageOf(error)}`);
  }
  if (args === null || typeof args !== 'object' || Array.isArray(args)) {
    return errorResult('the arguments must be a JSON object');
  }
  let value;
  try {
    value = entry.def.handler(args);
  } catch (error) {
    return failed(name, error);
  }
  if (value !== null && typeof value === 'object' && typeof value.then === 'function') {
    return Promise.resolve(value).then(
      (settled) => finish(entry, settled),
      (error) => failed(name, error),
    );
  }
  return finish(entry, value);
}

function finish(entry, value) {
  try {
    return toResult(entry, value);
  } catch (error) {
    return failed(entry.def.name, error);
  }
}

const RESULT_KEYS = ['content', 'structured', 'isError'];
const CONTENT_TYPES = ['text', 'image', 'audio', 'resource'];

function isResult(value) {
  return (
    value !== null &&
    typeof value === 'object' &&
    Array.isArray(value.content) &&
    Object.keys(value).every((key) => RESULT_KEYS.includes(key)) &&
    value.content.every((item) => item !== null && typeof item === 'object' && CONTENT_TYPES.includes(item.type))
  );
}

function structuredJson(value) {
  let json;
  try {
    json = JSON.stringify(value);
  } catch (error) {
    throw new Error(`the tool's output could not be serialised as JSON: ${messageOf(error)}`);
  }
  if (json === undefined) throw new Error(`the tool returned a value that is not JSON (${typeof value})`);
  // MCP structured content is an object: other values are wrapped, as the
  // Rust SDK does.
  return json.startsWith('{') ? json : `{"result":${json}}`;
}

function toResult({ def, outputSchema }, value) {
  if (isResult(value)) {
    const isError = value.isError === true;
    let structured;
    if (value.structured !== undefined) {
      if (value.structured === null || typeof value.structured !== 'object' || Array.isArray(value.structured)) {
        throw new Error('`structured` must be a plain object');
      }
      structured = structuredJson(value.structured);
    }
    if (outputSchema !== undefined && !isError && structured === undefined) {
      throw new Error(`tool \`${def.name}\` declares an output schema but returned no structured output`);
    }
    return { content: value.content.map(toWitContent), structured, isError };
  }
  if (typeof value === 'string' || value === undefined || value === null) {
    if (outputSchema !== undefined) {
      throw new Error(`tool \`${def.name}\` declares an output schema, so it must return an object (it returned ${value === null ? 'null' : typeof value})`);
    }
    return { content: typeof value === 'string' ? [{ tag: 'text', val: value }] : [], structured: undefined, isError: false };
  }
  const structured = structuredJson(value);
  return { content: [{ tag: 'text', val: structured }], structured, isError: false };
}

function toWitContent(item) {
  switch (item.type) {
    case 'text':
      return { tag: 'text', val: String(item.text) };
    case 'image':
    case 'audio':
      return { tag: item.type, val: { data: bytes(item.data, item.type), mimeType: String(item.mimeType) } };
    case 'resource': {
      const { uri, mimeType, text: body, blob } = item.resource ?? {};
      return {
        tag: 'embedded',
        val: {
          uri: String(uri),
          mimeType: mimeType === undefined ? undefined : String(mimeType),
          body: typeof body === 'string' ? { tag: 'text', val: body } : { tag: 'blob', val: bytes(blob, 'resource') },
        },
      };
    }
    default:
      throw new Error(`unknown content type ${JSON.stringify(item.type)}`);
  }
}

/**
 * The `toolcage:tool/tool` interface for every registered tool. Export it
 * from the app module as `tool`: `export { component as tool } from './toolcage/index.js';`
 */
export const component = Object.freeze({ describe, call });

/** The registered tools' definitions, in registration order (for tests). */
export function tools() {
  return [...registry.values()].map(({ def }) => def);
}

// ---------------------------------------------------------------------------
// Host services

const LEVELS = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency'];

// The bindings throw an error from their own realm whose `payload` is the
// host's message: rethrow it as an `Error` of this one.
function hostCall(fn) {
  try {
    return fn();
  } catch (error) {
    const payload = error !== null && typeof error === 'object' ? error.payload : undefined;
    throw new Error(typeof payload === 'string' ? payload : messageOf(error));
  }
}

/** Send a log message (levels as in syslog; `warn` means `warning`). */
export function log(level, message) {
  const name = level === 'warn' ? 'warning' : level;
  if (!LEVELS.includes(name)) throw new TypeError(`log: unknown level ${JSON.stringify(level)} (expected ${LEVELS.join(', ')})`);
  host.log(name, String(message));
}

export const debug = (message) => log('debug', message);
export const info = (message) => log('info', message);
export const warn = (message) => log('warning', message);
export const error = (message) => log('error', message);

/** Report progress of the current call: `done` out of `total`, if known. */
export function progress(done, total, message) {
  host.progress(Number(done), total === undefined || total === null ? undefined : Number(total), message === undefined || message === null ? undefined : String(message));
}

/**
 * Ask the user, through the client, for values matching `schema` (a flat
 * object schema of primitive properties). Ask before acting: on clients that
 * answer by replay the whole call runs again with the answer.
 */
export function elicit(message, schema) {
  return elicitResponse(hostCall(() => host.elicit(String(message), schemaText(schema))));
}

/** Ask the user a yes/no question: true only if they accept. */
export function confirm(message) {
  return elicit(message, { type: 'object', properties: {} }).action === 'accept';
}

/** Ask the user for values: the answer, or `undefined` if they decline or cancel. */
export function ask(message, schema) {
  // Elicitation schemas are restricted: keep only the object's shape.
  const shape = {};
  for (const key of ['type', 'properties', 'required']) {
    if (schema?.[key] !== undefined) shape[key] = schema[key];
  }
  const answer = elicit(message, shape);
  return answer.action === 'accept' ? answer.content : undefined;
}

/** Ask the client's model for a completion of a conversation. */
export function sampleWith(request) {
  const wit = samplingRequest(request);
  const response = hostCall(() => host.sample(wit));
  return { text: response.text, model: response.model, stopReason: response.stopReason };
}

/** Ask the client's model to complete `prompt` (at most `maxTokens`): its text. */
export function sample(prompt, maxTokens) {
  return sampleWith({ messages: [{ role: 'user', text: String(prompt) }], maxTokens }).text;
}

/**
 * The client's roots (MCP `roots/list`): the folders the user works in, as
 * `{uri, name}`. They say what the user is working on; they grant nothing
 * (what the tool can open is the operator's decision). Throws an `Error`
 * with the host's message when the client does not share its roots.
 */
export function roots() {
  return hostCall(() => host.roots()).map(rootOf);
}

function rootOf(root) {
  return { uri: root.uri, name: root.name };
}

const KEY = /^[A-Za-z0-9_.-]{1,64}$/;
const QUESTION_KEYS = {
  elicit: ['key', 'type', 'message', 'schema'],
  sample: ['key', 'type', 'messages', 'systemPrompt', 'maxTokens', 'temperature'],
  roots: ['key', 'type'],
};

function samplingRequest(request) {
  const { messages, systemPrompt, maxTokens, temperature } = request ?? {};
  if (!Number.isInteger(maxTokens) || maxTokens < 1 || maxTokens > 0xffffffff) {
    throw new TypeError('sample: `maxTokens` must be a positive integer');
  }
  return {
    messages: (messages ?? []).map((m) => ({ role: m.role === 'assistant' ? 'assistant' : 'user', text: String(m.text) })),
    systemPrompt: systemPrompt === undefined || systemPrompt === null ? undefined : String(systemPrompt),
    maxTokens,
    temperature: temperature === undefined || temperature === null ? undefined : Number(temperature),
  };
}

function schemaText(schema) {
  return typeof schema === 'string' ? schema : JSON.stringify(schema);
}

function toWitQuestion(question, index) {
  if (question === null || typeof question !== 'object') throw new TypeError(`askBatch: question ${index} must be an object ({key, type, ...})`);
  const { key, type } = question;
  if (typeof key !== 'string' || !KEY.test(key)) {
    throw new TypeError(`askBatch: the key ${JSON.stringify(key)} must be 1 to 64 characters from A-Z a-z 0-9 _ - .`);
  }
  const fields = QUESTION_KEYS[type];
  if (fields === undefined) throw new TypeError(`askBatch: question \`${key}\` has type ${JSON.stringify(type)} (expected 'elicit', 'sample' or 'roots')`);
  const extra = Object.keys(question).find((field) => !fields.includes(field));
  if (extra !== undefined) throw new TypeError(`askBatch: question \`${key}\` has an unknown field \`${extra}\` (expected ${fields.join(', ')})`);
  switch (type) {
    case 'elicit':
      return { key, question: { tag: 'elicit', val: { message: String(question.message), requestedSchema: schemaText(question.schema) } } };
    case 'sample':
      return { key, question: { tag: 'sample', val: samplingRequest(question) } };
    default:
      return { key, question: { tag: 'roots' } };
  }
}

function elicitResponse(response) {
  switch (response.tag) {
    case 'accept':
      return { action: 'accept', content: JSON.parse(response.val) };
    case 'decline':
      return { action: 'decline' };
    default:
      return { action: 'cancel' };
  }
}

function fromWitAnswer(key, result) {
  if (result.tag === 'err') return { key, type: 'error', message: String(result.val) };
  const answer = result.val;
  switch (answer.tag) {
    case 'elicit':
      return { key, type: 'elicit', ...elicitResponse(answer.val) };
    case 'sample':
      return { key, type: 'sample', text: answer.val.text, model: answer.val.model, stopReason: answer.val.stopReason };
    default:
      return { key, type: 'roots', roots: answer.val.map(rootOf) };
  }
}

/**
 * Ask several questions at once, each under a key of your choosing (1 to
 * 64 characters from `A-Z a-z 0-9 _ - .`, unique; `elicit-N`, `sample-N`,
 * `roots-N` and `toolcage-...` are the host's). A question is
 * `{key, type: 'elicit', message, schema}`,
 * `{key, type: 'sample', messages, systemPrompt?, maxTokens, temperature?}`
 * or `{key, type: 'roots'}`. On 2026-07-28 clients the client answers all
 * of them in one round. The answers come in the order asked, each
 * `{key, type, ...}` with the fields `elicit`, `sampleWith` or `roots` give,
 * or `{key, type: 'error', message}` for a question the client could not
 * answer. A malformed list (a bad or repeated key, more than 16 questions)
 * ends the call with an error.
 */
export function askBatch(questions) {
  if (!Array.isArray(questions)) throw new TypeError('askBatch: the questions must be an array');
  const asked = questions.map(toWitQuestion);
  const answers = host.ask(asked);
  return answers.map((result, i) => fromWitAnswer(asked[i].key, result));
}

/**
 * `elicit`, under a key of your choosing (see `askBatch`): the key a
 * 2026-07-28 client sees in its `inputRequests`. Throws as `elicit` does.
 */
export function elicitAs(key, message, schema) {
  const [answer] = askBatch([{ key, type: 'elicit', message, schema }]);
  if (answer === undefined) throw new Error('the host gave no elicitation answer');
  if (answer.type === 'error') throw new Error(answer.message);
  const { key: _key, type: _type, ...response } = answer;
  return response;
}

/**
 * From here the call may take long: for a tool registered with `taskStart:
 * 'on-begin-task'`, a client that accepts tasks gets its task now, and
 * questions asked after this are the task's. Anywhere else it does
 * nothing.
 */
export function beginTask() {
  host.beginTask();
}
