// Changes the sessions named on the command line at random — creates,
// appends, deletes and re-creates, repairing loads — until `maxOps` are done
// (then prints `done` and exits) or it is killed. Prints `ready` once open.
// argv: root writerTag ids(comma-separated) maxOps
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { chunkEvents, headerOf, line, storedLength } from './shared.mjs'

const [root, writer, idList, maxOpsText] = process.argv.slice(2)
const ids = idList.split(',')
const maxOps = Number(maxOpsText)
const persistence = createJsonlPersistence({ root })
const next = new Map()

async function nextOf(id) {
  if (!next.has(id)) next.set(id, await storedLength(persistence, id))
  return next.get(id)
}

line('ready')
try {
  for (let op = 0; op < maxOps; op++) {
    const id = ids[Math.floor(Math.random() * ids.length)]
    const from = await nextOf(id)
    const roll = Math.random()
    if (roll < 0.08 && from > 0) {
      await persistence.delete(id)
      next.set(id, 0)
      continue
    }
    const size = 1 + Math.floor(Math.random() ** 3 * 60)
    const result = await persistence.append({ header: headerOf(id), inheritedEventCount: 0 }, chunkEvents(writer, from, size))
    next.set(id, result.nextSeq)
  }
  await persistence.close()
  line('done')
} catch (error) {
  line(`error ${error.code} ${error.message}`)
  process.exit(3)
}
