// Exports two sessions of a memory persistence into a v0 root with the built
// package and prints, as its last line, the uid it ran as and the result, or
// the code, message and details of what the export threw: for tests that run
// it where writing fails (as another user, under a file size limit).
// Usage: export-memory.mjs <to> <noise-bytes> (random text in each session's
// message, so its frame cannot be compressed below that).
import { randomBytes } from 'node:crypto'
import { exportV0 } from '@dsh/session-import-v0'
import { createMemoryPersistence } from '@dsh/session-persistence'

const [to, noise] = process.argv.slice(2)
const uid = process.getuid?.()
const persistence = createMemoryPersistence()
for (const id of ['small', 'noisy']) {
  const header = { version: 1, id, createdAt: 1_760_000_000_000, isSeeded: false, delegationDepth: 0, cwd: '/srv/x' }
  const text = id === 'noisy' ? randomBytes(Number(noise)).toString('base64') : 'hello'
  const events = [
    { type: 'turn/start', data: { turn: 1 } },
    { type: 'user/message', data: { text } },
    { type: 'turn/end', data: { turn: 1, reason: 'completed' } },
  ].map((e, seq) => ({ ...e, seq, time: 1_760_000_000_000 + seq }))
  await persistence.append({ header, inheritedEventCount: 0 }, events)
}
try {
  const result = await exportV0({ ids: ['small', 'noisy'], persistence, to })
  console.log(JSON.stringify({ uid, sessions: result.sessions.map((s) => s.id) }))
} catch (error) {
  console.log(JSON.stringify({ uid, thrown: { code: error?.code, message: error?.message, details: error?.details } }))
}
