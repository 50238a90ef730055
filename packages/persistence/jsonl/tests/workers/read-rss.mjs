// Reads one session of a JSONL root with the built package, as `dsh show`
// (`inspect`, every event) or as a history page (`inspectRange`, the last
// `limit` events), and prints, as its last line, each event's seq, type and
// data size, and this process's peak resident set size (bytes).
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'

const [root, id, mode, limit] = process.argv.slice(2)
const persistence = createJsonlPersistence({ root, readOnly: true })
const read = mode === 'range' ? await persistence.inspectRange(id, { limit: Number(limit) }) : await persistence.inspect(id)
await persistence.close()
const events = read.events.map((e) => ({
  seq: e.seq,
  type: e.type,
  time: e.time,
  bytes: JSON.stringify(e.data).length,
  data: e.type === 'event/elided' ? e.data : undefined,
}))
console.log(JSON.stringify({ events, maxRss: process.resourceUsage().maxRSS * 1024 }))
