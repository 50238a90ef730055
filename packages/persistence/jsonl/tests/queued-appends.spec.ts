import { SessionId, type StoredSessionEvent } from '@dsh/session'
import { createJsonlPersistence, type JsonlCompression, type JsonlPersistence } from '@dsh/session-persistence-jsonl'
import { afterEach, describe, expect, it } from 'vitest'
import { event, eventsFrom, targetOf, tempDir } from './helpers.js'

// A batch appended while an earlier one of its session is being written is
// checked and encoded when `append` is called (against the seq after every
// batch accepted before it), and written in its turn (`src/writer.ts`).

const open: JsonlPersistence[] = []
const cleanups: Array<() => void> = []
afterEach(async () => {
  for (const p of open.splice(0)) await p.close()
  for (const cleanup of cleanups.splice(0)) cleanup()
})

function backend(compression: JsonlCompression): { p: JsonlPersistence; dir: string } {
  const { dir, cleanup } = tempDir('dsh-jsonl-queued-')
  cleanups.push(cleanup)
  const p = createJsonlPersistence({ root: dir, compression })
  open.push(p)
  return { p, dir }
}

const plain = (events: readonly StoredSessionEvent[]): unknown => JSON.parse(JSON.stringify(events))

for (const compression of ['zstd', 'none'] as const) {
  describe(`appends queued behind one in flight (${compression})`, () => {
    it('land in order, each as it was when append was called', async () => {
      const { p, dir } = backend(compression)
      await p.append(targetOf('s'), eventsFrom(0, 5))
      // Unfrozen events, changed (and the array grown) after the call: the log holds them as they were.
      const loose = [event(10, 'user/message', { text: 'as called' }), event(11, 'assistant/chunk', { turn: 1, index: 0, delta: 'x' })]
      const expected = [...eventsFrom(0, 5), ...eventsFrom(5, 5), ...(plain(loose) as StoredSessionEvent[]), ...eventsFrom(12, 40)]
      const pending = [
        p.append(targetOf('s'), eventsFrom(5, 5)),
        p.append(targetOf('s'), loose),
        p.append(targetOf('s'), eventsFrom(12, 40)),
      ]
      ;(loose[0]!.data as { text: string }).text = 'changed later'
      loose.push(event(12, 'user/message', { text: 'pushed later' }))
      const results = await Promise.all(pending)
      expect(results.map((r) => r.nextSeq)).toEqual([10, 12, 52])
      expect(plain((await p.inspect(SessionId('s'))).events)).toEqual(plain(expected))
      const reader = createJsonlPersistence({ root: dir, readOnly: true })
      open.push(reader)
      expect(plain((await reader.inspect(SessionId('s'))).events)).toEqual(plain(expected))
      expect(await reader.verify(SessionId('s'))).toMatchObject({ events: 52, tornBytes: 0 })
    })

    it('a queued batch that no longer continues the log, or is invalid, is refused in turn as it would be alone', async () => {
      const { p } = backend(compression)
      await p.append(targetOf('s'), eventsFrom(0, 5))
      const results = await Promise.allSettled([
        p.append(targetOf('s'), eventsFrom(5, 5)),
        // The same offset again: another writer's batch, already persisted.
        p.append(targetOf('s'), eventsFrom(5, 5)),
        // A gap inside the batch, and an event without a type.
        p.append(targetOf('s'), [...eventsFrom(10, 2), ...eventsFrom(13, 2)]),
        p.append(targetOf('s'), [...eventsFrom(10, 1), { ...event(11, '', {}) }]),
        // Another lifecycle of the id (a different header).
        p.append({ ...targetOf('s'), header: { ...targetOf('s').header, createdAt: 1 } }, eventsFrom(10, 1)),
        p.append(targetOf('s'), eventsFrom(10, 3)),
      ])
      const codes = results.map((r) => (r.status === 'fulfilled' ? 'ok' : (r.reason as { code?: string }).code))
      expect(codes).toEqual([
        'ok',
        'SESSION_PERSISTENCE_CONFLICT',
        'SESSION_PERSISTENCE_CONFLICT',
        'SESSION_PERSISTENCE_INVALID_EVENT',
        'SESSION_PERSISTENCE_CONFLICT',
        'ok',
      ])
      expect((await p.inspect(SessionId('s'))).events.map((e) => e.seq)).toEqual(Array.from({ length: 13 }, (_, i) => i))
    })

    it('a batch queued behind the delete of its session is refused, and nothing is re-created from it', async () => {
      const { p } = backend(compression)
      await p.append(targetOf('s'), eventsFrom(0, 5))
      const deleting = p.delete(SessionId('s'))
      const queued = p.append(targetOf('s'), eventsFrom(5, 5))
      await deleting
      await expect(queued).rejects.toMatchObject({ code: 'SESSION_PERSISTENCE_CONFLICT' })
      expect(await p.stat(SessionId('s'))).toBeUndefined()
    })
  })
}
