import { EVENT_MAX_BYTES, ID_MAX_LENGTH } from '@dsh/protocol/limits'
import { SessionId } from '@dsh/session'
import { describe, expect, it } from 'vitest'
import { event, events, expectCode, type FreshHarness, header, plain, target } from './fixtures.js'

/** An event whose encoded line (`{"type":…,"seq":…,"time":…,"data":{"text":…}}`) is `bytes` UTF-8 bytes plus at most 80. */
function sized(seq: number, bytes: number, char = 'x', type = 'assistant/text'): ReturnType<typeof event> {
  const width = Buffer.byteLength(char)
  return event(seq, type, { text: char.repeat(Math.ceil(bytes / width)) })
}

/** The size caps of `@dsh/protocol/limits` that every backend applies at append. */
export function describeLimits(fresh: FreshHarness): void {
  describe('size caps', () => {
    it('an id of ID_MAX_LENGTH characters is stored; one longer, or a 1,000,000-character one, is INVALID_ID and stores nothing', async () => {
      const { persistence: p } = await fresh()
      const longest = header('i'.repeat(ID_MAX_LENGTH))
      await p.append(target(longest), events(0, 1))
      expect((await p.inspect(longest.id)).header.id).toBe(longest.id)
      for (const length of [ID_MAX_LENGTH + 1, 1_000_000]) {
        // Built past `parseSessionHeader`, which refuses such an id itself: a backend refuses it too.
        const error = await p.append(target({ ...header('o'), id: SessionId('o'.repeat(length)) }), events(0, 1)).then(
          () => undefined,
          (e: unknown) => e as { code?: string; message?: string; details?: unknown },
        )
        expect(error).toMatchObject({ code: 'SESSION_PERSISTENCE_INVALID_ID', details: { length, max: ID_MAX_LENGTH } })
        expect(error?.message).toContain(String(ID_MAX_LENGTH))
      }
      expect((await p.list()).map((r) => r.header.id)).toEqual([longest.id])
    })

    it.each([
      ['`.`', '.'],
      ['`..`', '..'],
      ['a NUL', 'a\u0000b'],
      ['a lone surrogate', 'a\ud800b'],
      ['nothing', ''],
    ])('an id the API cannot name (%s) is INVALID_ID and stores nothing', async (_why, raw) => {
      const { persistence: p } = await fresh()
      await p.append(target(header('fine')), events(0, 1))
      await expectCode(p.append(target({ ...header('x'), id: raw as SessionId }), events(0, 1)), 'SESSION_PERSISTENCE_INVALID_ID')
      expect((await p.list()).map((r) => r.header.id)).toEqual(['fine'])
    })

    it.each([
      ['a relative cwd', { cwd: 'relative/dir' }],
      ['a fractional createdAt', { createdAt: 1.5 }],
      ['a negative delegationDepth', { delegationDepth: -1 }],
      ['a non-boolean isSeeded', { isSeeded: 'no' }],
      ['another header version', { version: 99 }],
    ])('a first append whose header would not read back (%s) is INVALID_HEADER and stores nothing', async (_why, fields) => {
      const { persistence: p } = await fresh()
      const h = { ...header('bad-header'), ...fields } as unknown as ReturnType<typeof header>
      await expectCode(p.append(target(h), events(0, 1)), 'SESSION_PERSISTENCE_INVALID_HEADER')
      expect(await p.stat(h.id)).toBeUndefined()
      expect(await p.list()).toEqual([])
      // The same id with a header that reads back is stored.
      await p.append(target(header('bad-header')), events(0, 1))
      expect((await p.inspect(SessionId('bad-header'))).events).toHaveLength(1)
    })

    it('event data nested deeper than JSON can encode is INVALID_EVENT, frozen or not, and stores nothing of its batch', async () => {
      const { persistence: p } = await fresh()
      const h = header('too-deep')
      await p.append(target(h), events(0, 1))
      const nested = (freeze: boolean): unknown => {
        let value: unknown = 'needle'
        for (let i = 0; i < 50_000; i++) value = freeze ? Object.freeze([value]) : [value]
        return value
      }
      for (const freeze of [true, false]) {
        const data = freeze ? Object.freeze({ deep: nested(true) }) : { deep: nested(false) }
        const item = { type: 'tool/result', seq: 2, time: 1, data }
        await expectCode(
          p.append(target(h), [event(1, 'ok', 1), (freeze ? Object.freeze(item) : item) as unknown as ReturnType<typeof event>]),
          'SESSION_PERSISTENCE_INVALID_EVENT',
        )
      }
      expect((await p.inspect(h.id)).events).toHaveLength(1)
    })

    it('an event without data, frozen or not, is INVALID_EVENT and stores nothing of its batch', async () => {
      const { persistence: p } = await fresh()
      const h = header('no-data')
      await p.append(target(h), events(0, 1))
      for (const item of [{ type: 't', seq: 1, time: 1 }, Object.freeze({ type: 't', seq: 1, time: 1, data: undefined })]) {
        await expectCode(p.append(target(h), [item as unknown as ReturnType<typeof event>]), 'SESSION_PERSISTENCE_INVALID_EVENT')
      }
      expect((await p.inspect(h.id)).events).toHaveLength(1)
    })

    it('data JSON would change (NaN, Infinity, -0, undefined, a Date, a Map, a cycle) is INVALID_EVENT naming where, and stores nothing of its batch', async () => {
      const { persistence: p } = await fresh()
      const h = header('lossy')
      await p.append(target(h), events(0, 1))
      const cycle: Record<string, unknown> = { a: 1 }
      cycle.self = cycle
      const lossy: Array<[unknown, string]> = [
        [{ score: Number.NaN }, 'score'],
        [{ list: [1, Number.POSITIVE_INFINITY] }, 'list[1]'],
        [{ delta: -0 }, 'delta'],
        [{ maybe: undefined }, 'maybe'],
        [{ list: [undefined] }, 'list[0]'],
        [{ at: new Date(0) }, 'at'],
        [{ map: new Map() }, 'map'],
        [cycle, 'self'],
      ]
      for (const [data, where] of lossy) {
        const error = await p
          .append(target(h), [event(1, 'ok', 1), { type: 't', seq: 2, time: 1, data } as unknown as ReturnType<typeof event>])
          .then(
            () => undefined,
            (caught: unknown) => caught,
          )
        expect(error, where).toMatchObject({ code: 'SESSION_PERSISTENCE_INVALID_EVENT' })
        expect((error as Error).message).toContain(where)
      }
      expect((await p.inspect(h.id)).events).toHaveLength(1)
    })

    it('a first batch holding an event over EVENT_MAX_BYTES is EVENT_TOO_LARGE and materializes nothing', async () => {
      const { persistence: p } = await fresh()
      const h = header('too-large-first')
      const batch = [events(0, 1)[0]!, sized(1, EVENT_MAX_BYTES + 1)]
      await expect(p.append(target(h), batch)).rejects.toMatchObject({
        code: 'SESSION_PERSISTENCE_EVENT_TOO_LARGE',
        details: { seq: 1, max: EVENT_MAX_BYTES },
      })
      expect(await p.stat(h.id)).toBeUndefined()
      expect(await p.list()).toEqual([])
    })

    it('the cap counts UTF-8 bytes, not characters: a later batch over it changes nothing, and the log goes on', async () => {
      const { persistence: p } = await fresh()
      const h = header('too-large-later')
      const { revision } = await p.append(target(h), events(0, 2))
      // About 0.55 × the cap in UTF-16 units, 1.1 × in UTF-8 bytes.
      await expectCode(p.append(target(h), [events(2, 1)[0]!, sized(3, EVENT_MAX_BYTES * 1.1, 'é')]), 'SESSION_PERSISTENCE_EVENT_TOO_LARGE')
      expect(await p.stat(h.id)).toBe(revision)
      expect((await p.inspect(h.id)).events).toHaveLength(2)
      expect((await p.append(target(h), events(2, 1))).nextSeq).toBe(3)
    })

    it('events just under the cap are stored and read back whole, alone or several of one type in a row', async () => {
      const { persistence: p } = await fresh()
      const h = header('under-cap')
      const near = EVENT_MAX_BYTES - 1024
      // Three like events in a row: a backend that packs runs into one line must keep each line readable.
      const batch = [sized(0, near), sized(1, near * 0.45, 'y'), sized(2, near * 0.45, 'z'), sized(3, near * 0.45, 'w')]
      expect((await p.append(target(h), batch)).nextSeq).toBe(4)
      const read = (await p.inspect(SessionId(h.id))).events
      expect(read.map((e) => e.type)).toEqual(batch.map((e) => e.type))
      expect(read.map((e) => (e.data as { text: string }).text.length)).toEqual(batch.map((e) => (e.data as { text: string }).text.length))
      expect(plain(read[3])).toEqual(plain(batch[3]))
    })
  })
}
