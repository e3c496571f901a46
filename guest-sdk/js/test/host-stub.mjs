// A stand-in for the `toolcage:tool/host@0.2.0` import, for running the SDK
// under Node: records what the SDK sends and answers from `globalThis.hostStub`
// (`ask` answers with `hostStub.ask`, a function of the questions).
// Errors are thrown as componentize-js throws them: an object from another
// realm (not an `Error` here) whose `payload` is the host's message.
const stub = (globalThis.hostStub ??= { calls: [], elicit: null, sample: null, roots: null, ask: null });

class ComponentError {
  constructor(value) {
    this.message = value;
    Object.defineProperty(this, 'payload', { value, enumerable: false });
  }
}

export function log(level, message) {
  stub.calls.push(['log', level, message]);
}
export function progress(done, total, message) {
  stub.calls.push(['progress', done, total, message]);
}
export function elicit(message, schema) {
  stub.calls.push(['elicit', message, schema]);
  const answer = stub.elicit;
  if (typeof answer === 'string') throw new ComponentError(answer);
  return answer;
}
export function sample(request) {
  stub.calls.push(['sample', request]);
  const answer = stub.sample;
  if (typeof answer === 'string') throw new ComponentError(answer);
  return answer;
}
export function roots() {
  stub.calls.push(['roots']);
  const answer = stub.roots;
  if (typeof answer === 'string') throw new ComponentError(answer);
  return answer;
}
export function ask(questions) {
  stub.calls.push(['ask', questions]);
  return stub.ask(questions);
}
export function beginTask() {
  stub.calls.push(['beginTask']);
}
