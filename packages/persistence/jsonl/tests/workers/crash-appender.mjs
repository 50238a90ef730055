// Appends batches to one session until it is killed, printing `ack <nextSeq>`
// after every append that resolved. Starts with `load` (crash repair of
// whatever the previous, killed, writer left). After `maxAppends` appends it
// idles, so a late kill cannot grow the log without bound.
// argv: root compression id writerTag minBatch maxBatch maxAppends
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { deltaOf, headerOf, line } from './shared.mjs'

const [root, compression, id, writer, minBatchText, maxBatchText, maxAppendsText] = process.argv.slice(2)
const minBatch = Number(minBatchText)
const maxBatch = Number(maxBatchText)
const maxAppends = Number(maxAppendsText)
const persistence = createJsonlPersistence({ root, compression })
const target = { header: headerOf(id), inheritedEventCount: 0 }
let next = 0
let turn = 0
let open = false
try {
  const loaded = await persistence.load(id)
  next = loaded.events.length
  turn = loaded.events.filter((e) => e.type === 'turn/start').length
} catch (error) {
  if (error.code !== 'SESSION_PERSISTENCE_NOT_FOUND') {
    line(`error ${error.code} ${error.message}`)
    process.exit(3)
  }
}
line(`ready ${next}`)
for (let appends = 0; appends < maxAppends; appends++) {
  // Mostly small batches, sometimes large ones (a kill is then likely to land mid-write).
  const size = minBatch + Math.floor(Math.random() ** 4 * (maxBatch - minBatch))
  const events = []
  // Frozen like a Session's events (the backend then skips its lossless-JSON copy).
  const push = (type, data) => events.push(Object.freeze({ type, seq: next + events.length, time: Date.now(), data: Object.freeze(data) }))
  if (!open) {
    push('turn/start', { turn: ++turn })
    open = true
  }
  while (events.length < size) push('assistant/chunk', { turn, index: next + events.length, delta: deltaOf(writer, next + events.length) })
  if (Math.random() < 0.2) {
    push('turn/end', { turn, reason: 'completed' })
    open = false
  }
  try {
    const result = await persistence.append(target, events)
    next = result.nextSeq
    line(`ack ${next}`)
  } catch (error) {
    line(`error ${error.code} ${error.message}`)
    process.exit(3)
  }
}
line('idle')
setInterval(() => {}, 1000)
