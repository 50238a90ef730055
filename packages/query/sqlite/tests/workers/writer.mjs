// A writer process: appends to its own sessions of a shared JSONL root, one
// batch at a time and interleaved across sessions, then deletes and
// re-creates its first session with other text (same header).
// Usage: node writer.mjs <root> <prefix> <sessions> <rounds>
import { parseSessionHeader, SessionLogOffset, SessionSeq } from '@dsh/session'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'

const [root, prefix, sessionsArg, roundsArg] = process.argv.slice(2)
const sessions = Number(sessionsArg)
const rounds = Number(roundsArg)
const persistence = createJsonlPersistence({ root })
const headers = Array.from({ length: sessions }, (_, i) =>
  parseSessionHeader({
    version: 1,
    id: `${prefix}-${i}`,
    createdAt: 1_700_000_000_000 + i,
    isSeeded: false,
    delegationDepth: 0,
    cwd: `/w/${prefix}`,
  }),
)
const event = (seq, text) => ({ type: 'user/message', seq: SessionSeq(seq), time: 1_700_000_000_000 + seq, data: { text } })
for (let round = 0; round < rounds; round++) {
  for (const header of headers) {
    await persistence.append({ header, inheritedEventCount: SessionLogOffset(0) }, [event(round, `${prefix} round${round} shared words`)])
  }
}
const first = headers[0]
await persistence.delete(first.id)
await persistence.append({ header: first, inheritedEventCount: SessionLogOffset(0) }, [event(0, `${prefix} reborn shared words`)])
await persistence.close()
