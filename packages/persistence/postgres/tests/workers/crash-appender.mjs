// Appends batches to one session until it is killed, printing `ack <nextSeq>`
// after every acknowledged batch. It first takes the session over (load),
// waiting while a killed predecessor's lease is still held.
import { setTimeout as sleep } from 'node:timers/promises'
import { parseSessionHeader, SessionLogOffset, SessionSeq } from '@dsh/session'
import { createPostgresPersistence } from '@dsh/session-persistence-postgres'

const [url, id, writer] = process.argv.slice(2)
const persistence = await createPostgresPersistence({ connectionString: url, migrate: false })
const header = parseSessionHeader({ version: 1, id, createdAt: 1_700_000_000_000, isSeeded: false, delegationDepth: 0 })
const target = { header, inheritedEventCount: SessionLogOffset(0) }

let next
for (let attempt = 0; next === undefined; attempt++) {
  try {
    next = (await persistence.load(id)).events.length
  } catch (error) {
    if (error.code === 'SESSION_PERSISTENCE_NOT_FOUND') next = 0
    else if (error.code === 'SESSION_PERSISTENCE_LOCKED' && attempt < 1000) await sleep(5)
    else throw error
  }
}
console.log(`ready ${next}`)
for (;;) {
  const size = 1 + (next % 3)
  const batch = Array.from({ length: size }, (_, i) => ({
    type: 'user/message',
    seq: SessionSeq(next + i),
    time: next + i,
    data: { text: `${writer}:${next + i}`, pad: 'x'.repeat(200) },
  }))
  await persistence.append(target, batch)
  next += size
  console.log(`ack ${next}`)
}
