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

import * as host from 'toolcage:tool/host@0.1.0';

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
const registry = new Map();

function objectSchema(schema, what, name) {
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema) || schema.type !== 'object') {
    throw new TypeError(`tool \`${name}\`: \`${what}\` must be an object schema ({type: 'object', ...})`);
  }
  return JSON.stringify(schema);
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
  const { name, title, description, input, output, annotations = {}, ...unknown } = definition;
  if (typeof name !== 'string' || !NAME.test(name)) {
    throw new TypeError(`tool: the name ${JSON.stringify(name)} must be 1 to 128 characters from A-Z a-z 0-9 _ - .`);
  }
  const extra = Object.keys(unknown);
  if (extra.length > 0) {
    throw new TypeError(`tool \`${name}\`: unknown field \`${extra[0]}\` (expected name, title, description, input, output, annotations)`);
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
  const schemaJson = typeof schema === 'string' ? schema : JSON.stringify(schema);
  const response = hostCall(() => host.elicit(String(message), schemaJson));
  switch (response.tag) {
    case 'accept':
      return { action: 'accept', content: JSON.parse(response.val) };
    case 'decline':
      return { action: 'decline' };
    default:
      return { action: 'cancel' };
  }
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
  const { messages, systemPrompt, maxTokens, temperature } = request ?? {};
  if (!Number.isInteger(maxTokens) || maxTokens < 1 || maxTokens > 0xffffffff) {
    throw new TypeError('sample: `maxTokens` must be a positive integer');
  }
  const response = hostCall(() =>
    host.sample({
      messages: (messages ?? []).map((m) => ({ role: m.role === 'assistant' ? 'assistant' : 'user', text: String(m.text) })),
      systemPrompt: systemPrompt === undefined || systemPrompt === null ? undefined : String(systemPrompt),
      maxTokens,
      temperature: temperature === undefined || temperature === null ? undefined : Number(temperature),
    }),
  );
  return { text: response.text, model: response.model, stopReason: response.stopReason };
}

/** Ask the client's model to complete `prompt` (at most `maxTokens`): its text. */
export function sample(prompt, maxTokens) {
  return sampleWith({ messages: [{ role: 'user', text: String(prompt) }], maxTokens }).text;
}
