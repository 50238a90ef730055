// Creates `count` sessions at once through a persistence coordinator, one
// event each, as a host does in a burst, then closes the coordinator (which
// retries what failed) and the backend. Run under a low `ulimit -n`: the
// sessions outnumber the descriptors the process may open. Prints `done` and
// exits 0 when every event was stored; exits 2 when the coordinator gave up
// on some. An unhandled rejection exits the process (Node's default) with 1.
// argv: root count
import { Context } from '@dsh/context'
import { SessionStore } from '@dsh/session'
import { SessionPersistenceCoordinator } from '@dsh/session-persistence'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { line } from './shared.mjs'

const [root, countText] = process.argv.slice(2)
const quiet = { debug() {}, info() {}, warn() {}, error() {} }
const ctx = new Context({ logger: quiet })
ctx.provide('logger', quiet)
const sessions = new SessionStore(ctx)
ctx.provide('sessions', sessions)
const persistence = createJsonlPersistence({ root })
// Retries as a host's coordinator does; close waits long enough for a slow machine.
const coordinator = new SessionPersistenceCoordinator(ctx, persistence, { closeWaitMs: 120_000 })
coordinator.start()
for (let i = 0; i < Number(countText); i++) sessions.create({ id: `b${i}`, cwd: '/tmp' }).append('user/message', { text: `hi ${i}` })
try {
  await coordinator.close()
} catch (error) {
  line(`unstored ${coordinator.unstored().length} ${error.code} ${error.message}`)
  process.exit(2)
}
await persistence.close()
line('done')
