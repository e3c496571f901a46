// A plain component in JavaScript (componentize-js): its WIT world's
// exported functions are toolcage tools, with no toolcage SDK. Test-only.

import { get } from 'wasi:config/store@0.2.0-draft';

// A setting read through `wasi:config/store`, as components that take an
// API key do.
export function greeting(name) {
  const greeting = get('greeting');
  if (greeting === undefined) {
    throw 'the `greeting` setting is not granted';
  }
  return `${greeting}, ${name}!`;
}

export function reverse(text) {
  return [...text].reverse().join('');
}

// An async function behind a synchronous WIT export.
export async function shout(text) {
  await Promise.resolve();
  return text.toUpperCase();
}

// A `result` export: a thrown error becomes `err`.
export function parse(text) {
  if (!/^[0-9]+$/.test(text)) {
    throw `not a non-negative integer: ${JSON.stringify(text)}`;
  }
  return Number(text);
}

// A throw with no `result` to carry it: the runtime aborts; toolcage
// reports the message it printed.
export function boom(why) {
  throw new Error(`boom on purpose: ${why}`);
}

export const text = {
  wordCount(text) {
    return text.split(/\s+/).filter((w) => w.length > 0).length;
  },
};
