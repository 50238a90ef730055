import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { capHistoryPage } from '../src/bodies.js'
import type { HistoryPageBody, WireStoredEvent } from '../src/index.js'
import { ELIDED_EVENT_TYPE, elidedEvent } from '../src/limits.js'

// `capHistoryPage` is the one byte cap of a history page (the HTTP history
// routes, MCP `show_session`). It counts UTF-8 bytes without `Buffer`, so the
// count is checked here against Node's own.

const header = { id: 's', createdAt: 0, cwd: '/w' } as HistoryPageBody['header']
const pageOf = (events: WireStoredEvent[]): HistoryPageBody => ({ header, inheritedEventCount: 0, events, total: events.length })
const eventOf = (seq: number, text: string): WireStoredEvent => ({ type: 'user/message', seq, time: 0, data: { text } })
const bytesOf = (event: WireStoredEvent) => Buffer.byteLength(JSON.stringify(event))
/** What an event takes of a page capped at `cap`: itself, or its elided form when it alone is over the cap. */
const takes = (event: WireStoredEvent, cap: number) =>
  bytesOf(event) <= cap
    ? bytesOf(event)
    : bytesOf(elidedEvent(event.seq, event.time, { bytes: bytesOf(event), reason: 'page-too-large', type: event.type }))

describe('capHistoryPage', () => {
  it('keeps exactly the newest events whose JSON fits the cap in UTF-8 bytes, for any text (ASCII, two-, three- and four-byte characters, lone surrogates)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.string({ unit: fc.constantFrom('a', 'é', '€', '😀', '\ud800', '\udc00', '"', '\n'), maxLength: 40 }), {
          minLength: 1,
          maxLength: 12,
        }),
        fc.integer({ min: 1, max: 600 }),
        (texts, cap) => {
          const events = texts.map((text, seq) => eventOf(seq, text))
          const page = capHistoryPage(pageOf(events), cap)
          // What Node's byte count says fits, from the newest back; the newest is always kept.
          let first = events.length - 1
          let used = takes(events[first]!, cap)
          for (let i = events.length - 2; i >= 0 && used + takes(events[i]!, cap) <= cap; i--) {
            used += takes(events[i]!, cap)
            first = i
          }
          expect(page.events.map((event) => event.seq)).toEqual(events.slice(first).map((event) => event.seq))
          expect(page.nextBefore).toBe(first > 0 ? first : undefined)
          for (const [k, event] of page.events.entries()) {
            const original = events[first + k]!
            if (bytesOf(original) > cap)
              expect(event).toMatchObject({
                type: ELIDED_EVENT_TYPE,
                data: { elided: { bytes: bytesOf(original), reason: 'page-too-large' } },
              })
            else expect(event).toBe(original)
          }
        },
      ),
      { numRuns: 300 },
    )
  })

  it('answers a page that fits as it is', () => {
    const page = pageOf([eventOf(0, 'a'), eventOf(1, 'b')])
    expect(capHistoryPage(page, 1_000)).toBe(page)
  })
})
