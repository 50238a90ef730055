import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createJsonlPersistence } from '@dsh/session-persistence-jsonl'
import { expect, it } from 'vitest'
import { header, message, openQuery, persist, store } from './helpers.js'

// In the e2e lane for its fixture: 10,000 durable JSONL sessions take a while to write on a busy machine.
// To see the same with strace: `strace -f -e trace=openat dsh sessions --root R --limit 50 2>&1 | grep -c log.jsonl` prints 0.
it('reopening over 10,000 unchanged JSONL sessions opens no log (the change journal says nothing changed)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'dsh-query-open-'))
  // Removing 10,000 session directories is part of this test's (generous) time, not of a hook's.
  try {
    await reopen(join(dir, 'root'))
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})

async function reopen(root: string): Promise<void> {
  const writer = createJsonlPersistence({ root, compression: 'none' })
  const N = 10_000
  let next = 0
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < N) {
        const i = next++
        await persist(writer, header(`s${i}`, i), [message(0, `words of session ${i}`)])
      }
    }),
  )
  await writer.close()
  const path = join(root, '.dsh', 'index.sqlite')
  const first = createJsonlPersistence({ root, compression: 'none' })
  const built = await openQuery({ sessions: store().sessions, persistence: first, path })
  await built.query.close()
  await first.close()
  const persistence = createJsonlPersistence({ root, compression: 'none', readOnly: true })
  const { query } = await openQuery({ sessions: store().sessions, persistence, path })
  expect(persistence.metrics).toMatchObject({ headerReads: 0, bodyReads: 0, logOpens: 0, rescans: 0 })
  expect(await query.reconcile()).toMatchObject({ source: 'feed', changed: 0, read: 0 })
  expect((await query.listSessions({ limit: 50 })).records).toHaveLength(50)
  expect(persistence.metrics).toMatchObject({ headerReads: 0, bodyReads: 0, logOpens: 0, rescans: 0 })
  await query.close()
  await persistence.close()
}
