// Types of @toolcage/tool (index.js). The schema builders carry the type of
// the values they describe, so a handler's argument type is inferred from
// its `input` schema: `Infer<typeof schema>`.

declare const INFER: unique symbol;
declare const OPTIONAL: unique symbol;

/** A schema built by `s`, describing values of type `T`. (`T` exists only for the type checker.) */
export interface Typed<T> {
  readonly [INFER]: T;
}

/** A JSON Schema object (plain JSON: given directly or built with `s`). */
export type JsonSchema = { readonly [key: string]: unknown };

/** A JSON Schema object built by `s` for values of type `T`. */
export type Schema<T> = Typed<T> & JsonSchema;

/** A property schema marked with `s.optional`: not required. */
export interface Optional {
  readonly [OPTIONAL]: true;
}

/** The type of the values a schema describes; `any` for a schema not built with `s`. */
export type Infer<S> = S extends Typed<infer T> ? T : any;

type Simplify<T> = { [K in keyof T]: T[K] } & {};
type RequiredKeys<P> = { [K in keyof P]: P[K] extends Optional ? never : K }[keyof P];
type ObjectOf<P, R extends PropertyKey> = Simplify<
  { -readonly [K in keyof P & R]: Infer<P[K]> } & { -readonly [K in Exclude<keyof P, R>]?: Infer<P[K]> }
>;

/** Keywords every builder accepts. */
export interface Common<T> {
  title?: string;
  description?: string;
  default?: T;
  examples?: T[];
}

export interface StringOptions extends Common<string> {
  minLength?: number;
  maxLength?: number;
  /** An ECMA-262 regular expression, as text. */
  pattern?: string;
  /** For example `date-time`, `email`, `uri`. */
  format?: string;
}

export interface NumberOptions extends Common<number> {
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  multipleOf?: number;
}

export interface ArrayOptions<T> extends Common<T[]> {
  minItems?: number;
  maxItems?: number;
  uniqueItems?: boolean;
}

export interface ObjectOptions<R> extends Common<Record<string, unknown>> {
  /** The required properties; by default every property not wrapped in `s.optional`. */
  required?: R;
  /** Whether properties not listed are allowed (default `false`: refused). */
  additionalProperties?: boolean;
}

/** Builders of JSON Schema objects whose types `Infer` reads. */
export declare const s: {
  /**
   * An object schema. Every property is required unless wrapped in
   * `s.optional` (or unless `required` lists the required ones); properties
   * not listed are refused unless `additionalProperties: true`.
   */
  object<P extends { readonly [key: string]: object }, const R extends readonly (keyof P & string)[] | undefined = undefined>(
    properties: P,
    options?: ObjectOptions<R>,
  ): Schema<ObjectOf<P, R extends readonly (infer K)[] ? K : RequiredKeys<P>>>;
  /** A string schema; with `enum`, one of those strings. */
  string<const E extends readonly string[] = never>(options?: StringOptions & { enum?: E }): Schema<[E] extends [never] ? string : E[number]>;
  integer(options?: NumberOptions): Schema<number>;
  number(options?: NumberOptions): Schema<number>;
  boolean(options?: Common<boolean>): Schema<boolean>;
  array<S extends object>(items: S, options?: ArrayOptions<Infer<S>>): Schema<Infer<S>[]>;
  /** Mark a property of `s.object` as not required. */
  optional<S extends object>(schema: S): S & Optional;
  /** Exactly this value (`const`). */
  literal<const V extends string | number | boolean | null>(value: V, options?: Common<V>): Schema<V>;
  /** One of these strings. */
  enum<const V extends readonly string[]>(values: V, options?: Common<V[number]>): Schema<V[number]>;
};

// ---------------------------------------------------------------------------
// Results

export interface TextContent {
  type: 'text';
  text: string;
}
export interface ImageContent {
  type: 'image';
  data: Uint8Array;
  mimeType: string;
}
export interface AudioContent {
  type: 'audio';
  data: Uint8Array;
  mimeType: string;
}
export interface ResourceContent {
  type: 'resource';
  resource: { uri: string; mimeType?: string; text?: string; blob?: Uint8Array };
}
export type Content = TextContent | ImageContent | AudioContent | ResourceContent;

/** Bytes, as the content helpers take them. */
export type Bytes = Uint8Array | ArrayBuffer | ArrayBufferView | readonly number[];

export function text(value: string): TextContent;
export function image(data: Bytes, mimeType: string): ImageContent;
export function audio(data: Bytes, mimeType: string): AudioContent;
/** An embedded resource: a string body is a text resource, bytes a blob. */
export function resource(uri: string, body: string | Bytes, mimeType?: string): ResourceContent;

/**
 * A result given as content items. `structured` is a JSON object (required
 * when the tool declares an `output` schema); `isError: true` reports a
 * failure without throwing.
 */
export interface ToolResult {
  content: Content[];
  structured?: Record<string, unknown>;
  isError?: boolean;
}

// ---------------------------------------------------------------------------
// Tools

/** Hints for clients about how a tool behaves; all default to false. */
export interface Annotations {
  readOnly?: boolean;
  destructive?: boolean;
  idempotent?: boolean;
  openWorld?: boolean;
}

/**
 * An icon a client may show beside the tool (MCP `Icon`). The host refuses
 * a tool whose icons break its rules, and lists at most 8.
 */
export interface Icon {
  /** An `https:` URL (the client fetches it) or a `data:image/...` URI (at most 64 KiB). */
  src: string;
  /** `image/png`, `image/svg+xml`, ..., if the URL does not make it plain. */
  mimeType?: string;
  /** Sizes it is drawn for, each `WxH` (`48x48`) or `any`. */
  sizes?: string[];
  /** The theme it suits; none means any. */
  theme?: 'light' | 'dark';
}

/**
 * Whether calls may run as MCP tasks (protocol 2026-07-28): `forbidden`
 * (the default) answers every call in its request; `optional` runs a task
 * when the client accepts tasks; `required` only then (other clients are
 * refused before the call runs).
 */
export type TaskSupport = 'forbidden' | 'optional' | 'required';

/**
 * When a task-run call becomes a task: as it starts (`with-call`, the
 * default), or when it calls `beginTask()` (`on-begin-task`; questions asked
 * before that are asked in the request).
 */
export type TaskStart = 'with-call' | 'on-begin-task';

/** A capability the client must have for a tool to work. */
export type ClientNeed = 'sampling' | 'elicitation' | 'roots';

export interface ToolDefinition<I, O> {
  /** 1 to 128 characters from `A-Z a-z 0-9 _ - .`. */
  name: string;
  title?: string;
  /** Written for a model: what the tool does, when to use it, what it returns. */
  description: string;
  /** The arguments' JSON Schema, an object schema (default: no arguments). */
  input?: I;
  /** The structured output's JSON Schema, an object schema. */
  output?: O;
  annotations?: Annotations;
  /** Icons for clients to show (default: none). */
  icons?: Icon[];
  /** Whether calls may run as tasks (default `forbidden`). */
  taskSupport?: TaskSupport;
  /** When a task-run call becomes a task (default `with-call`). */
  taskStart?: TaskStart;
  /**
   * What the client must be able to do for this tool to work: a 2026-07-28
   * request that does not declare it is refused (error -32021) before the
   * call runs (default: nothing).
   */
  needs?: ClientNeed[];
}

/**
 * What a handler may return: with an `output` schema, an object of its type
 * (or a `ToolResult` with `structured`); without one, a string (one text
 * item), a `ToolResult`, or any JSON value (structured output plus its JSON
 * as text; a value that is not an object is wrapped as `{result: value}`).
 */
export type Returned<O> = [O] extends [undefined] ? unknown : Infer<O> | ToolResult;

export interface Tool<I, O> {
  readonly name: string;
  readonly title: string | undefined;
  readonly description: string;
  readonly input: I;
  readonly output: O;
  readonly annotations: Readonly<Required<Annotations>>;
  readonly icons: readonly Readonly<Icon & { sizes: readonly string[] }>[];
  readonly taskSupport: TaskSupport;
  readonly taskStart: TaskStart;
  readonly needs: readonly ClientNeed[];
  readonly handler: (args: Infer<I>) => Returned<O> | Promise<Returned<O>>;
}

/**
 * Register a tool. `handler(args)` gets the arguments (already checked by
 * the host against `input`) and returns the result or a Promise of it; a
 * thrown error (or rejected Promise) becomes an error result whose text is
 * the error's message.
 */
export function tool<I extends object = Schema<{}>, O extends object | undefined = undefined>(
  definition: ToolDefinition<I, O>,
  handler: (args: Infer<I>) => Returned<O> | Promise<Returned<O>>,
): Tool<I, O>;

/** The registered tools, in registration order. */
export function tools(): Tool<any, any>[];

// ---------------------------------------------------------------------------
// The WIT export (`toolcage:tool/tool`), as componentize-js sees it

export interface Descriptor {
  name: string;
  title: string | undefined;
  description: string;
  inputSchema: string;
  outputSchema: string | undefined;
  annotations: { readOnly: boolean; destructive: boolean; idempotent: boolean; openWorld: boolean };
  icons: { src: string; mimeType: string | undefined; sizes: string[]; theme: 'light' | 'dark' | undefined }[];
  taskSupport: TaskSupport;
  taskStart: TaskStart;
  /** The WIT `client-needs` flags. */
  needs: { sampling: boolean; elicitation: boolean; roots: boolean };
}

export type WitContent =
  | { tag: 'text'; val: string }
  | { tag: 'image'; val: { data: Uint8Array; mimeType: string } }
  | { tag: 'audio'; val: { data: Uint8Array; mimeType: string } }
  | {
      tag: 'embedded';
      val: {
        uri: string;
        mimeType: string | undefined;
        body: { tag: 'text'; val: string } | { tag: 'blob'; val: Uint8Array };
      };
    };

export interface CallResult {
  content: WitContent[];
  structured: string | undefined;
  isError: boolean;
}

/**
 * The `toolcage:tool/tool` interface for every registered tool. The app
 * module must export it as `tool`:
 *
 *     export { component as tool } from './toolcage/index.js';
 */
export declare const component: {
  describe(): Descriptor[];
  call(name: string, argumentsJson: string): CallResult | Promise<CallResult>;
};

// ---------------------------------------------------------------------------
// Host services

export type Level = 'debug' | 'info' | 'notice' | 'warning' | 'error' | 'critical' | 'alert' | 'emergency';

/** Send a log message to toolcage's log and, where it asked for them, the client. */
export function log(level: Level | 'warn', message: string): void;
export function debug(message: string): void;
export function info(message: string): void;
export function warn(message: string): void;
export function error(message: string): void;

/** Report progress of the current call: `done` out of `total`, if known. */
export function progress(done: number, total?: number, message?: string): void;

export type ElicitResponse<T> = { action: 'accept'; content: T } | { action: 'decline' } | { action: 'cancel' };

/**
 * Ask the user for values matching `schema` (a flat object schema of
 * primitive properties). Throws an `Error` with the host's message when the
 * client cannot elicit or the request is malformed. Ask before acting: the
 * call may be replayed from the start with the answer.
 */
export function elicit<S extends object>(message: string, schema: S | string): ElicitResponse<Infer<S>>;

/** Ask the user a yes/no question: true only if they accept. Throws as `elicit` does. */
export function confirm(message: string): boolean;

/** Ask the user for values: the answer, or `undefined` if they decline or cancel. Throws as `elicit` does. */
export function ask<S extends object>(message: string, schema: S): Infer<S> | undefined;

export interface SamplingMessage {
  role: 'user' | 'assistant';
  text: string;
}
export interface SamplingRequest {
  messages: SamplingMessage[];
  systemPrompt?: string;
  maxTokens: number;
  temperature?: number;
}
export interface SamplingResponse {
  text: string;
  model: string;
  stopReason: string | undefined;
}

/**
 * Ask the client's model to complete `prompt`: its text. Throws an `Error`
 * with the host's message when the operator has not allowed this tool to
 * sample, the client cannot, or the user refuses.
 */
export function sample(prompt: string, maxTokens: number): string;
/** Ask the client's model for a completion of a conversation. Throws as `sample` does. */
export function sampleWith(request: SamplingRequest): SamplingResponse;

/** A root the client shares (MCP `Root`): a folder the user works in. */
export interface Root {
  /** Usually `file:///...`. */
  uri: string;
  name: string | undefined;
}

/**
 * The client's roots: what the user works on. They grant nothing (what the
 * tool can open is the operator's decision). Throws an `Error` with the
 * host's message when the client does not share its roots.
 */
export function roots(): Root[];

/** A question for `askBatch`, under a key of the tool's choosing. */
export type Question =
  | { key: string; type: 'elicit'; message: string; schema: object | string }
  | ({ key: string; type: 'sample' } & SamplingRequest)
  | { key: string; type: 'roots' };

/** The answer to one question of `askBatch`, under the question's key. */
export type Answer =
  | ({ key: string; type: 'elicit' } & ElicitResponse<any>)
  | ({ key: string; type: 'sample' } & SamplingResponse)
  | { key: string; type: 'roots'; roots: Root[] }
  /** The client could not answer this question; `message` says why. */
  | { key: string; type: 'error'; message: string };

/**
 * Ask several questions at once, each under a key (1 to 64 characters from
 * `A-Z a-z 0-9 _ - .`, unique; `elicit-N`, `sample-N`, `roots-N` and
 * `toolcage-...` are the host's): on 2026-07-28 clients the client answers
 * all of them in one round. Answers come in the order asked. A malformed
 * list (a bad or repeated key, more than 16 questions) ends the call.
 */
export function askBatch(questions: Question[]): Answer[];

/**
 * `elicit`, under a key of your choosing (see `askBatch`): the key a
 * 2026-07-28 client sees in its `inputRequests`. Throws as `elicit` does.
 */
export function elicitAs<S extends object>(key: string, message: string, schema: S | string): ElicitResponse<Infer<S>>;

/**
 * From here the call may take long: for a tool with `taskStart:
 * 'on-begin-task'`, a client that accepts tasks gets its task now. Anywhere
 * else it does nothing.
 */
export function beginTask(): void;
