// Module resolution hook: a bare specifier that does not resolve from here
// is resolved as if imported from conformance/reference, whose node_modules
// holds the pinned clients (npm ci there; scripts/test.sh does).
const reference = new URL('../reference/package.json', import.meta.url).href

export async function resolve(specifier, context, next) {
  try {
    return await next(specifier, context)
  } catch (err) {
    if (err?.code !== 'ERR_MODULE_NOT_FOUND' || /^[./]|^[a-z]+:/.test(specifier)) throw err
    return next(specifier, { ...context, parentURL: reference })
  }
}
