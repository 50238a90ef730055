// Runs under a small RLIMIT_FSIZE (`ulimit -f`): appends until a write fails,
// printing `ack <nextSeq>` per acknowledged append and then the failure.
// argv: root compression id
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { deltaOf, headerOf, line } from './shared.mjs'

// Handling SIGXFSZ makes an oversized write fail with EFBIG instead of killing the process.
process.on('SIGXFSZ', () => {})
const [root, compression, id] = process.argv.slice(2)
const persistence = createJsonlPersistence({ root, compression })
const target = { header: headerOf(id), inheritedEventCount: 0 }
let next = 0
for (;;) {
  const events = Array.from({ length: 40 }, (_, i) => ({
    type: 'assistant/chunk',
    seq: next + i,
    time: 0,
    data: { turn: 1, index: next + i, delta: deltaOf('limited', next + i).repeat(4) },
  }))
  try {
    next = (await persistence.append(target, events)).nextSeq
    line(`ack ${next}`)
  } catch (error) {
    line(`failed ${error.code}`)
    break
  }
}
await persistence.close()
line('done')
