// Runs as an unprivileged user (the test starts it with runuser): lists a root
// that holds one session directory this user may not read, then tries to read
// that session by id. Prints one JSON line.
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'

const [root, badId] = process.argv.slice(2)
const persistence = createJsonlPersistence({ root, readOnly: true })
const listed = (await persistence.list()).map((record) => record.header.id).sort()
const damaged = persistence.damagedLogs().map((entry) => ({ id: entry.id, code: entry.code, message: entry.message }))
const reads = {}
for (const [name, read] of [
  ['inspect', () => persistence.inspect(badId)],
  ['stat', () => persistence.stat(badId)],
]) {
  try {
    await read()
    reads[name] = 'ok'
  } catch (error) {
    reads[name] = error.code ?? String(error)
  }
}
const good = (await persistence.inspect('good-2')).events.length
await persistence.close()
process.stdout.write(`${JSON.stringify({ uid: process.getuid(), listed, damaged, reads, good })}\n`)
