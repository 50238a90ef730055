// Preloaded with `node --import`: reports every module URL the process
// resolves (ESM and builtins) on stderr as `IMPORT <url>`, so a test can see
// exactly what a command loads. CommonJS modules (the CLI's program chunks,
// better-sqlite3) never reach the resolve hook: their files are reported from
// the require cache when the process exits, and the builtins they require
// (which the cache does not hold) as `node:<name>` when required.
import Module, { createRequire, isBuiltin, register } from 'node:module'
import { pathToFileURL } from 'node:url'

const require = Module.prototype.require
Module.prototype.require = function traced(id) {
  if (isBuiltin(id)) process.stderr.write(`IMPORT ${id.startsWith('node:') ? id : `node:${id}`}\n`)
  return require.call(this, id)
}

const hooks = `
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context)
  process.stderr.write('IMPORT ' + result.url + '\\n')
  return result
}
`
register(`data:text/javascript,${encodeURIComponent(hooks)}`)

const required = createRequire(import.meta.url).cache
process.on('exit', () => {
  for (const file of Object.keys(required)) process.stderr.write(`IMPORT ${pathToFileURL(file).href}\n`)
})
