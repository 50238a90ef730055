// Another process writing a session of a PostgreSQL store: takes the session
// over (load, which takes its writer lease), then appends one event every
// 50 ms, printing `ack <next seq>` after each, until it is killed.
// `node pg-appender.mjs <database url> <session id>`
import { setTimeout as sleep } from 'node:timers/promises'
import { createPostgresPersistence } from '@dsh/session-persistence-postgres'

const [url, id] = process.argv.slice(2)
const persistence = await createPostgresPersistence({ connectionString: url, migrate: false })
const loaded = await persistence.load(id)
const target = { header: loaded.header, inheritedEventCount: loaded.inheritedEventCount }
for (let next = loaded.events.length; ; next++) {
  await persistence.append(target, [{ type: 'user/message', seq: next, time: Date.now(), data: { text: `from another process, ${next}` } }])
  console.log(`ack ${next + 1}`)
  await sleep(50)
}
