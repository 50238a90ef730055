// Reports which files of the built package a fresh process has loaded after
// using it one way, and which of the package's source modules those files
// hold (the build bundles src modules into a few chunks; each chunk's source
// map names them). Prints one JSON line: { chunks: [...], modules: [...], result }.
// argv: root mode [cursor] — 'open' (open read-only, changes(), close()),
// 'open-writable' (the same, writable), 'list' (changes(), then list()).
// Modules are counted by a resolve hook registered before the package is
// imported: it appends every URL the loader resolves to a file, synchronously
// on the hooks thread, before the import it serves can finish — so the file
// is complete when the awaited operations are (no waiting for messages).
import { readFileSync, rmSync } from 'node:fs'
import { register } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const record = join(tmpdir(), `dsh-module-probe-${process.pid}.txt`)
register(
  `data:text/javascript,${encodeURIComponent(`
import { appendFileSync } from 'node:fs'
let record
export function initialize(data) { record = data.record }
export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context)
  appendFileSync(record, resolved.url + '\\n')
  return resolved
}`)}`,
  { data: { record } },
)

const [root, mode, since] = process.argv.slice(2)
const { createJsonlPersistence } = await import('@dsh/session-persistence-jsonl')
const persistence = createJsonlPersistence({ root, readOnly: mode !== 'open-writable' })
const feed = await persistence.changes(since)
const result = { changed: feed.ids.length, rescan: feed.rescan }
if (mode === 'list') result.listed = (await persistence.list()).length
else if (mode !== 'open' && mode !== 'open-writable') throw new Error(`unknown mode ${mode}`)
await persistence.close()
const seen = new Set(readFileSync(record, 'utf8').split('\n'))
rmSync(record, { force: true })
// This package's built files (the package's own dist/, whatever path the workspace puts it at).
const dist = new URL('../../dist/', import.meta.url).href
const loaded = [...seen].filter((url) => url.startsWith(dist))
const chunks = loaded.map((url) => url.slice(dist.length)).sort()
const modules = loaded
  .flatMap((url) => JSON.parse(readFileSync(new URL(`${url}.map`), 'utf8')).sources)
  .map((source) => source.slice(source.lastIndexOf('/') + 1).replace(/\.ts$/, '.js'))
  .sort()
process.stdout.write(`${JSON.stringify({ chunks, modules, result })}\n`)
