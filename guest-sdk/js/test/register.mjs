// `node --import ./test/register.mjs`: resolve the WIT import to host-stub.mjs.
import { register } from 'node:module';

register(
  'data:text/javascript,' +
    encodeURIComponent(`
      export async function resolve(specifier, context, next) {
        if (specifier === 'toolcage:tool/host@0.2.0') {
          return { url: ${JSON.stringify(new URL('./host-stub.mjs', import.meta.url).href)}, shortCircuit: true };
        }
        return next(specifier, context);
      }`),
);
