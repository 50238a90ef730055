// Reports which zstd bindings a process has loaded after using the built
// package one way. Prints one JSON line: { loaded: [...], result }.
// argv: root mode [cursor] — 'import' (import only), 'feed' (changes() and list()),
// 'append' (one batch to a new session), 'inspect' (inspect every session).
import { createRequire } from 'node:module'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'

const [root, mode, since] = process.argv.slice(2)
let result = null
if (mode !== 'import') {
  const persistence = createJsonlPersistence({ root, readOnly: mode === 'feed' || mode === 'inspect' })
  if (mode === 'feed') {
    const feed = await persistence.changes(since)
    const listed = await persistence.list()
    result = { changed: feed.ids.length, rescan: feed.rescan, listed: listed.length }
  } else if (mode === 'append') {
    const header = { version: 1, id: 'probe', createdAt: 1_700_000_000_000, isSeeded: false, delegationDepth: 0 }
    await persistence.append({ header, inheritedEventCount: 0 }, [
      { type: 'user/message', seq: 0, time: 1, data: { text: 'x'.repeat(2000) } },
    ])
    result = { appended: 1 }
  } else if (mode === 'inspect') {
    let events = 0
    for (const record of await persistence.list()) events += (await persistence.inspect(record.header.id)).events.length
    result = { events }
  } else throw new Error(`unknown mode ${mode}`)
  await persistence.close()
}

// Two independent witnesses: the shared objects the process has mapped
// (a native binding cannot run without being dlopen'ed), and the CommonJS
// module cache (both bindings are CommonJS packages).
const shared = process.report.getReport().sharedObjects.filter((path) => /zstd/i.test(path))
const cached = Object.keys(createRequire(import.meta.url).cache).filter((path) => /zstd/i.test(path))
const loaded = []
if ([...shared, ...cached].some((path) => path.includes('zstd-napi'))) loaded.push('zstd-napi')
if ([...shared, ...cached].some((path) => path.includes('@mongodb-js') || path.includes('mongodb-js'))) loaded.push('@mongodb-js/zstd')
process.stdout.write(`${JSON.stringify({ loaded, shared, cached, result })}\n`)
