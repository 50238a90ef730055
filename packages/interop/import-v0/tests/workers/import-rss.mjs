// Imports a v0 root into a fresh JSONL root with the built packages and
// prints, as its last line, each session's status and reason code and this
// process's peak resident set size (bytes): the size-cap tests bound memory
// by what a whole process took, not by timing.
import { importV0 } from '@dsh/session-import-v0'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'

const [from, root] = process.argv.slice(2)
const persistence = createJsonlPersistence({ root })
const report = await importV0({ from, persistence })
await persistence.close()
const sessions = report.sessions.map((s) => ({ status: s.status, code: s.reason?.code, message: s.reason?.message }))
console.log(JSON.stringify({ sessions, maxRss: process.resourceUsage().maxRSS * 1024 }))
