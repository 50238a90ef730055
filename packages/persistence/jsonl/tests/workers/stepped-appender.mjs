// Appends batches to the sessions named on the command line in lockstep with
// its parent: it prints `ready` once every session is loaded (crash repair of
// what a previous, killed, writer left), then `ack <id> <nextSeq>` after every
// append that resolved, and after each line waits for a line on stdin before
// going on. After `maxAppends` appends it prints `done` and exits.
// argv: root writerTag ids(comma-separated) maxAppends
import { createInterface } from 'node:readline'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { chunkEvents, headerOf, line, storedLength } from './shared.mjs'

const [root, writer, idList, maxAppendsText] = process.argv.slice(2)
const ids = idList.split(',')
const maxAppends = Number(maxAppendsText)
const input = createInterface({ input: process.stdin })[Symbol.asyncIterator]()
const persistence = createJsonlPersistence({ root })
const next = new Map()

async function step(text) {
  line(text)
  if ((await input.next()).done) process.exit(0)
}

try {
  for (const id of ids) {
    next.set(id, await storedLength(persistence, id))
  }
  await step('ready')
  for (let appends = 0; appends < maxAppends; appends++) {
    const id = ids[Math.floor(Math.random() * ids.length)]
    const from = next.get(id)
    // Mostly small batches (into the padding), sometimes large ones (the padding grows).
    const size = 1 + Math.floor(Math.random() ** 3 * 80)
    const result = await persistence.append({ header: headerOf(id), inheritedEventCount: 0 }, chunkEvents(writer, from, size))
    next.set(id, result.nextSeq)
    await step(`ack ${id} ${result.nextSeq}`)
  }
  await persistence.close()
  line('done')
  process.exit(0)
} catch (error) {
  line(`error ${error.code} ${error.message}`)
  process.exit(3)
}
