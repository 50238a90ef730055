import { statSync } from 'node:fs'
import { historyPage } from '@dsh/protocol'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Stack, startStack, turn } from './support/stack.js'

// History pages over the disk stack (zstd JSONL logs; the in-memory query,
// so no index reads a log in the background while bytes are counted): a page
// of a session that went cold reads the batches holding it, not the log. The
// stack's backend still holds the session's writer, so the end it finds may
// lie up to one checkpoint distance (16 KiB) past the newest end slot, for
// the owner check's listing and for the read itself: bounds that do not grow
// with the log.

const TURNS = 400
/** Two walks from an end slot (the listing's and the read's), at most a checkpoint distance each. */
const WALKS = 2 * 16 * 1024
/** The header prefixes, slots, the page's batches and the tail check's batch. */
const SLACK = 16 * 1024
let stack: Stack
let logBytes = 0

/** Text that does not compress away, so a turn weighs what a transcript's does. */
function noise(seed: number): string {
  let x = seed
  return Array.from({ length: 240 }, () => {
    x = (x * 1103515245 + 12345) % 2 ** 31
    return (x >>> 8).toString(36)
  }).join(' ')
}

beforeAll(async () => {
  stack = await startStack({ backend: 'disk', query: 'memory' })
  const long = stack.sessions.create({ id: 'long' })
  // One durable batch per turn, as a working session writes them.
  for (let i = 0; i < TURNS; i++) {
    turn(long, noise(i))
    await stack.sessions.flush(long)
  }
  await stack.sessions.dispose('long')
  logBytes = statSync(stack.disk!.persistence.logPath('long')).size
})

afterAll(async () => {
  await stack.close()
})

/** The page and the bytes the backend read to answer it. */
async function counted(path: string): Promise<{ page: ReturnType<typeof historyPage.parse>; bytes: number }> {
  const before = stack.disk!.persistence.metrics.bytesRead
  const { status, body } = await stack.get(path)
  expect(status, JSON.stringify(body)).toBe(200)
  return { page: historyPage.parse(body), bytes: stack.disk!.persistence.metrics.bytesRead - before }
}

describe('history pages read what they show', () => {
  it('the last page of a cold session reads its last batches, not the log', async () => {
    const { page, bytes } = await counted('/api/sessions/long/history?limit=5')
    const total = TURNS * 4
    expect(page.events.map((e) => e.seq)).toEqual([total - 5, total - 4, total - 3, total - 2, total - 1])
    expect(page).toMatchObject({ total, nextBefore: total - 5 })
    expect(page.events.at(-1)).toMatchObject({ type: 'turn/end', data: { turn: TURNS, reason: 'completed' } })
    expect(bytes).toBeGreaterThan(0)
    expect(bytes, `${bytes} of a ${logBytes}-byte log`).toBeLessThan(WALKS + SLACK)
    expect(logBytes).toBeGreaterThan(8 * (WALKS + SLACK))
  })

  it('an earlier page holds the right events and reads trailers, not the batches, after it', async () => {
    const { page, bytes } = await counted('/api/sessions/long/history?before=400&limit=10')
    expect(page.events.map((e) => e.seq)).toEqual(Array.from({ length: 10 }, (_, i) => 390 + i))
    expect(page.events[0]).toMatchObject({ type: 'assistant/message', data: { turn: 98 } })
    expect(page.nextBefore).toBe(390)
    // One trailer (52 bytes) read per later batch, one batch per turn.
    expect(bytes, `${bytes} of a ${logBytes}-byte log`).toBeLessThan(WALKS + SLACK + (TURNS - 97) * 52)
  })

  it('a live session answers from memory, reading nothing', async () => {
    const live = stack.sessions.create({ id: 'live-long' })
    for (let i = 0; i < 20; i++) turn(live, noise(1000 + i))
    await stack.sessions.flush(live)
    const { page, bytes } = await counted('/api/sessions/live-long/history?limit=3')
    expect(page.events.map((e) => e.seq)).toEqual([77, 78, 79])
    expect(bytes).toBe(0)
  })
})
