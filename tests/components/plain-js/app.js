// A plain component in JavaScript (componentize-js): its WIT world's
// exported functions are toolcage tools, with no toolcage SDK. Test-only.

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

export const text = {
  wordCount(text) {
    return text.split(/\s+/).filter((w) => w.length > 0).length;
  },
};
