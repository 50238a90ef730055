// Changes sessions of its own over a root whose change journal it compacts
// past `journalLimit` bytes. Each step changes one to three sessions at once
// (so several operations are in flight): mostly it creates a new session
// (`<tag>-<n>`, changed once, so a lost change of it could not hide behind a
// later one), else it appends to one it created, or now and then deletes one.
// After every step it prints `ack <id> <nextSeq>` for each session it changed
// (0: deleted) — its ledger; after `steps` steps it prints
// `compactions <n>` and `done` and exits.
// argv: root writerTag steps journalLimit
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { chunkEvents, headerOf, line } from './shared.mjs'

const [root, writer, stepsText, limitText] = process.argv.slice(2)
const steps = Number(stepsText)
const persistence = createJsonlPersistence({ root, journalLimit: Number(limitText) })
const next = new Map()
let created = 0

function pick() {
  const roll = Math.random()
  const existing = [...next.keys()].filter((id) => next.get(id) > 0)
  if (existing.length === 0 || roll < 0.6) return { id: `${writer}-${created++}`, remove: false }
  return { id: existing[Math.floor(Math.random() * existing.length)], remove: roll > 0.97 }
}

try {
  line('ready')
  for (let step = 0; step < steps; step++) {
    const chosen = new Map()
    for (let i = 1 + Math.floor(Math.random() * 3); i > 0; i--) {
      const { id, remove } = pick()
      chosen.set(id, remove)
    }
    await Promise.all(
      [...chosen].map(async ([id, remove]) => {
        const from = next.get(id) ?? 0
        if (remove) {
          await persistence.delete(id)
          next.set(id, 0)
        } else {
          const size = 1 + Math.floor(Math.random() * 6)
          const result = await persistence.append({ header: headerOf(id), inheritedEventCount: 0 }, chunkEvents(writer, from, size))
          next.set(id, result.nextSeq)
        }
        line(`ack ${id} ${next.get(id)}`)
      }),
    )
  }
  const compactions = persistence.metrics.journalCompactions
  await persistence.close()
  line(`compactions ${compactions}`)
  line('done')
} catch (error) {
  line(`error ${error.code} ${error.message}`)
  process.exit(3)
}
