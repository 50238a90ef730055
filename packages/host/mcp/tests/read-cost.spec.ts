import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createHost, type Host } from '@dsh/host'
import type { SessionId } from '@dsh/session'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { afterEach, describe, expect, it } from 'vitest'
import { connectClient } from './support.js'

// A read costs what it shows: `show_session` answers a page of a persisted
// session by walking the log's batch trailers back from its end (the
// persistence's ranged read, as `dsh show --limit` and HTTP history do), so
// the last 20 events of a large session cost about what the last 20 of a
// small one do, and a small share of reading the log.

const EVENTS_PER_BATCH = 20
const LARGE_BATCHES = 500
const SMALL_BATCHES = 3
const LIMIT = 20

const cleanups: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

/** Text that does not compress away, so a batch weighs what a transcript's does against its trailer. */
function noise(seed: number): () => string {
  let x = seed
  return () =>
    Array.from({ length: 24 }, () => {
      x = (x * 1103515245 + 12345) % 2 ** 31
      return (x >>> 8).toString(36)
    }).join(' ')
}

/** A root holding `large` and `small`, written by one host (one durable batch per flush) that exits. */
async function writeRoot(): Promise<string> {
  const root = mkdtempSync(join(tmpdir(), 'dsh-mcp-cost-'))
  cleanups.push(() => rmSync(root, { recursive: true, force: true }))
  const writer = await createHost({ root })
  try {
    for (const [id, batches, seed] of [
      ['large', LARGE_BATCHES, 7],
      ['small', SMALL_BATCHES, 11],
    ] as const) {
      const session = writer.sessions.create({ id })
      const text = noise(seed)
      for (let batch = 0; batch < batches; batch++) {
        for (let i = 0; i < EVENTS_PER_BATCH; i++) session.append('user/message', { text: text() })
        await writer.sessions.flush(session)
      }
      await writer.sessions.dispose(id)
    }
  } finally {
    await writer.dispose()
  }
  return root
}

async function connect(host: Host): Promise<Client> {
  const client = await connectClient(host.ctx)
  cleanups.push(() => client.close())
  return client
}

describe('MCP read tools read what they show', () => {
  it('show_session with limit 20 reads O(20 events) of a 10,000-event session: about what it reads of a 60-event one, a small share of the log', async () => {
    const root = await writeRoot()
    // As `dsh mcp` opens a root without --allow-control: read-only, queries in a worker.
    const host = await createHost({ root, readOnly: true, queryWorker: true })
    cleanups.push(() => host.dispose())
    const client = await connect(host)
    const bytesOf = async (read: () => Promise<unknown>): Promise<number> => {
      const before = host.persistence.metrics.bytesRead
      await read()
      return host.persistence.metrics.bytesRead - before
    }
    const show = async (id: string, limit: number): Promise<{ total: number; events: Array<{ seq: number }> }> => {
      const result = await client.callTool({ name: 'show_session', arguments: { id, limit } })
      expect(result.isError ?? false, JSON.stringify(result.content)).toBe(false)
      return result.structuredContent as { total: number; events: Array<{ seq: number }> }
    }

    const total = LARGE_BATCHES * EVENTS_PER_BATCH
    let page: Awaited<ReturnType<typeof show>> | undefined
    const large = await bytesOf(async () => {
      page = await show('large', LIMIT)
    })
    expect(page!.total).toBe(total)
    expect(page!.events.map((event) => event.seq)).toEqual(Array.from({ length: LIMIT }, (_, i) => total - LIMIT + i))
    const small = await bytesOf(() => show('small', LIMIT))
    const whole = await bytesOf(() => host.persistence.inspect('large' as SessionId))

    expect(small).toBeGreaterThan(0)
    expect(large, `tail of the large session: ${large} bytes; of the small one: ${small}`).toBeLessThanOrEqual(2 * small)
    expect(large * 50, `tail: ${large} bytes of a ${whole}-byte log`).toBeLessThan(whole)
    // A deeper page costs more than the tail: the read follows what is shown, not a fixed cost.
    const deeper = await bytesOf(() => show('large', 200))
    expect(deeper).toBeGreaterThan(large)
    expect(deeper * 5).toBeLessThan(whole)
  })
})
