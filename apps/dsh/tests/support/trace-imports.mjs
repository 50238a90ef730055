// Preloaded with `node --import`: reports every module URL the process
// resolves (ESM and builtins) on stderr as `IMPORT <url>`, so a test can see
// exactly what a command loads. CommonJS modules (better-sqlite3 is required,
// not imported) never reach the resolve hook: they are reported from the
// require cache when the process exits.
import { createRequire, register } from 'node:module'
import { pathToFileURL } from 'node:url'

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
