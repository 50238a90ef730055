import { createHost } from '@dsh/host'
import { tempDir } from '@dsh/test-kit'
import { afterEach, describe, expect, it } from 'vitest'

// The first listing after a writer exits costs what changed since the
// writer's last index pass (it makes one as it closes), not a read of every
// session it wrote: a writer that left its sessions pending would make the
// next command open every log.

const SESSIONS = 2_000
const PAGE = 50
const WAVE = 64

const cleanups: Array<() => void> = []
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup()
})

describe('the first listing after a writer', () => {
  it('a writer that created 2,000 sessions and exited leaves the index current: the next process lists its newest 50 opening no log', async () => {
    const { dir: root, cleanup } = tempDir('dsh-first-listing-', { memory: true })
    cleanups.push(cleanup)
    const base = 1_800_000_000_000
    const writer = await createHost({ root })
    try {
      for (let start = 0; start < SESSIONS; start += WAVE) {
        const disposing: Promise<void>[] = []
        for (let i = start; i < Math.min(SESSIONS, start + WAVE); i++) {
          // Newest first in listing order: the i-th session created is the i-th from the top.
          const session = writer.sessions.create({ id: `w${String(i).padStart(5, '0')}`, createdAt: base - i })
          session.append('user/message', { text: `question ${i}` })
          disposing.push(writer.sessions.dispose(session.id))
        }
        await Promise.all(disposing)
      }
    } finally {
      await writer.dispose()
    }

    // The next command, as `dsh sessions` opens a root.
    const reader = await createHost({ root, readOnly: true })
    try {
      const page = await reader.query.listSessions({ limit: PAGE })
      expect(page.records.map((record) => record.header.id)).toEqual(
        Array.from({ length: PAGE }, (_, k) => `w${String(SESSIONS - 1 - k).padStart(5, '0')}`),
      )
      expect(reader.persistence.metrics).toMatchObject({ logOpens: 0, headerReads: 0, bodyReads: 0 })
    } finally {
      await reader.dispose()
    }
  })
})
