// An index process: reconciles the SQLite index of a JSONL root again and
// again while writers run, until told 'stop' on stdin; then reconciles once
// more and compares every answer with an index built from nothing.
// Prints 'ready' once its loop has reconciled, then one JSON line
// { equal, reconciles, sources, sessions, first, fresh } at the end.
// Usage: node indexer.mjs <root> <indexPath> <freshIndexPath>
import { Context } from '@dsh/context'
import { SessionStore } from '@dsh/session'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { createSqliteSessionQuery } from '@dsh/session-query-sqlite'

const [root, indexPath, freshPath] = process.argv.slice(2)
let stop = false
process.stdin.on('data', (chunk) => {
  if (String(chunk).includes('stop')) stop = true
})
const silent = { warn: () => {}, error: () => {} }
const persistence = createJsonlPersistence({ root, readOnly: true })
const sessions = new SessionStore(new Context({ logger: silent }))
const query = await createSqliteSessionQuery({ sessions, persistence, path: indexPath, logger: silent })
let reconciles = 0
const sources = new Set()
while (!stop) {
  sources.add((await query.reconcile()).source)
  reconciles++
  // The test starts the writers only after this line, so the tailing loop is
  // running while they write however slowly this process was scheduled.
  if (reconciles === 1) process.stdout.write('ready\n')
  await new Promise((resolve) => setTimeout(resolve, 5))
}
sources.add((await query.reconcile()).source)
process.stdin.destroy()

async function answers(q) {
  const records = []
  let cursor
  do {
    const page = await q.listSessions({ limit: 100, ...(cursor === undefined ? {} : { cursor }) })
    records.push(...page.records.map((r) => [r.header, r.inheritedEventCount, r.revision]))
    cursor = page.nextCursor
  } while (cursor !== undefined)
  const searches = []
  for (const text of ['shared', 'reborn', 'round0', 'round3 words']) {
    for (const kind of ['searchEvents', 'searchSessions']) {
      const hits = []
      let next
      do {
        const page = await q[kind]({ text, limit: 100, ...(next === undefined ? {} : { cursor: next }) })
        hits.push(...page.hits)
        next = page.nextCursor
      } while (next !== undefined)
      searches.push(hits)
    }
  }
  return { records, searches }
}

const first = await answers(query)
await query.close()
const fresh = await createSqliteSessionQuery({ sessions, persistence, path: freshPath, logger: silent })
const second = await answers(fresh)
await fresh.close()
await persistence.close()
process.stdout.write(
  `${JSON.stringify({ equal: JSON.stringify(first) === JSON.stringify(second), reconciles, sources: [...sources], sessions: first.records.length, first: first.searches.map((s) => s.length), fresh: second.searches.map((s) => s.length) })}\n`,
)
