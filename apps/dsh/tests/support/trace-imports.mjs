// Preloaded with `node --import`: reports every module URL the process
// resolves (ESM and builtins) on stderr as `IMPORT <url>`, so a test can see
// exactly what a command loads.
import { register } from 'node:module'

const hooks = `
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context)
  process.stderr.write('IMPORT ' + result.url + '\\n')
  return result
}
`
register(`data:text/javascript,${encodeURIComponent(hooks)}`)
