// Appends `batches` batches to one session another process appends to as
// well, reopening its backend every few batches (so the writer lock changes
// hands). Prints `ack <first> <count>` per acknowledged batch and
// `refused <code>` per LOCKED/CONFLICT, then `done`.
// argv: root compression id writerTag batches
import { setTimeout as sleep } from 'node:timers/promises'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { deltaOf, headerOf, line } from './shared.mjs'

const [root, compression, id, writer, batchesText] = process.argv.slice(2)
const target = { header: headerOf(id), inheritedEventCount: 0 }
let persistence = createJsonlPersistence({ root, compression })
let next = 0
let sinceReopen = 0
for (let done = 0; done < Number(batchesText); ) {
  const size = 1 + Math.floor(Math.random() * 8)
  const events = Array.from({ length: size }, (_, i) => ({
    type: 'assistant/chunk',
    seq: next + i,
    time: Date.now(),
    data: { turn: 1, index: next + i, delta: deltaOf(writer, next + i) },
  }))
  try {
    const result = await persistence.append(target, events)
    line(`ack ${next} ${size}`)
    next = result.nextSeq
    done++
  } catch (error) {
    if (error.code === 'SESSION_PERSISTENCE_LOCKED') {
      line(`refused ${error.code}`)
      await sleep(2)
      continue
    }
    if (error.code === 'SESSION_PERSISTENCE_CONFLICT') {
      line(`refused ${error.code}`)
      // Someone else appended: continue after what is stored now.
      next = (await persistence.inspect(id)).events.length
      continue
    }
    line(`error ${error.code} ${error.message}`)
    process.exit(3)
  }
  if (++sinceReopen >= 1 + Math.floor(Math.random() * 4)) {
    await persistence.close()
    persistence = createJsonlPersistence({ root, compression })
    sinceReopen = 0
  }
}
await persistence.close()
line('done')
