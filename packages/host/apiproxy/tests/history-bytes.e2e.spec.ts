import { historyPage } from '@dsh/protocol'
import { ELIDED_EVENT_TYPE, HISTORY_PAGE_MAX_BYTES } from '@dsh/protocol/limits'
import { afterEach, describe, expect, it } from 'vitest'
import { type Stack, startStack } from './support/stack.js'

// History pages are capped in bytes as well as in events: a page stops before
// the event that would take it past `maxHistoryPageBytes` (its `nextBefore`
// continues from there), and an event that alone is over the cap is answered
// as an elided event. Counts of bytes and events only.

let stack: Stack | undefined
afterEach(async () => {
  await stack?.close()
  stack = undefined
})

async function page(path: string): Promise<ReturnType<typeof historyPage.parse>> {
  const { status, body } = await stack!.get(path)
  expect(status, JSON.stringify(body).slice(0, 500)).toBe(200)
  return historyPage.parse(body)
}

const bytesOf = (events: readonly unknown[]): number => events.reduce<number>((n, e) => n + Buffer.byteLength(JSON.stringify(e)), 0)

describe('history pages are capped in bytes', () => {
  it('at the default cap: three 7 MiB events make two pages, each within HISTORY_PAGE_MAX_BYTES, and nextBefore reaches them all', async () => {
    stack = await startStack()
    const session = stack.sessions.create({ id: 'heavy' })
    for (const fill of ['a', 'b', 'c']) session.append('user/message', { text: fill.repeat(7 * 1024 * 1024) })
    await stack.sessions.flush(session)
    const last = await page('/api/sessions/heavy/history?limit=3')
    expect(last.events.map((e) => e.seq)).toEqual([1, 2])
    expect(last).toMatchObject({ total: 3, nextBefore: 1 })
    expect(bytesOf(last.events)).toBeLessThanOrEqual(HISTORY_PAGE_MAX_BYTES)
    const first = await page(`/api/sessions/heavy/history?limit=3&before=${last.nextBefore}`)
    expect(first.events.map((e) => [e.seq, (e.data as { text: string }).text.length])).toEqual([[0, 7 * 1024 * 1024]])
    expect(first).not.toHaveProperty('nextBefore')
  })

  it('an event alone over the cap is answered elided, with its size and type; the events around it page as usual', async () => {
    stack = await startStack({ limits: { maxHistoryPageBytes: 4096 } })
    const session = stack.sessions.create({ id: 'one-big' })
    session.append('user/message', { text: 'small before' })
    session.append('assistant/message', { text: 'é'.repeat(3000) })
    session.append('user/message', { text: 'small after' })
    await stack.sessions.flush(session)
    const tail = await page('/api/sessions/one-big/history?limit=1')
    expect(tail.events).toMatchObject([{ seq: 2, type: 'user/message', data: { text: 'small after' } }])
    const whole = await page('/api/sessions/one-big/history?limit=10')
    expect(whole.events.map((e) => e.type)).toEqual(['user/message', ELIDED_EVENT_TYPE, 'user/message'])
    const elided = whole.events[1]!
    expect(elided.seq).toBe(1)
    expect(elided.data).toEqual({ elided: { bytes: expect.any(Number), reason: 'page-too-large', type: 'assistant/message' } })
    expect((elided.data as { elided: { bytes: number } }).elided.bytes).toBeGreaterThan(6000)
    expect(whole).not.toHaveProperty('nextBefore')
    expect(bytesOf(whole.events)).toBeLessThanOrEqual(4096)
  })

  it('a page of many small events stops at the cap and continues exactly where it stopped', async () => {
    stack = await startStack({ limits: { maxHistoryPageBytes: 2048 } })
    const session = stack.sessions.create({ id: 'many' })
    for (let i = 0; i < 60; i++) session.append('user/message', { text: `message ${i} ${'x'.repeat(100)}` })
    await stack.sessions.flush(session)
    const seen: number[] = []
    let before: number | undefined
    for (let pages = 0; pages < 60; pages++) {
      const p = await page(`/api/sessions/many/history?limit=1000${before === undefined ? '' : `&before=${before}`}`)
      expect(bytesOf(p.events)).toBeLessThanOrEqual(2048)
      expect(p.events.length).toBeGreaterThan(1)
      seen.unshift(...p.events.map((e) => e.seq))
      before = p.nextBefore
      if (before === undefined) break
    }
    expect(seen).toEqual(Array.from({ length: 60 }, (_, i) => i))
  })
})
